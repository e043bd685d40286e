"""A tiny trained classifier for the web demo: scikit-learn's bundled 8x8 digits, no downloads.

:func:`digits_mlp` trains a multilayer perceptron (64 -> 32 -> 10, relu) with scikit-learn's
``MLPClassifier`` on its bundled ``load_digits`` data set (1797 images, 8x8, grey levels 0..16;
about a second on one core, seeded, so the weights are the same on every run) and returns it as
an ONNX model: input ``input`` float32 [1, 1, 8, 8] (grey levels 0..16, as in the data set),
Flatten, Gemm, Relu, Gemm, Softmax; output ``output`` float32 [1, 10] (class probabilities).
:func:`digits_samples` returns held-out test images with their labels for checks and the page.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["digits_mlp", "digits_samples", "IMAGE", "CLASSES"]

IMAGE = 8
CLASSES = 10
OPSET = 17
IR_VERSION = 9


def _data() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the digits classifier needs scikit-learn (pip install scikit-learn): "
                          "its bundled 8x8 digits data set trains the model") from None
    d = load_digits()
    return d.data.astype("float32"), d.target.astype("int64")


def _split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed, seeded train/test split: a random fifth is held out (the data set cycles
    through the classes in order, so a strided pick would hold out only some classes)."""
    perm = np.random.default_rng(0).permutation(n)
    return np.sort(perm[n // 5:]), np.sort(perm[:n // 5])


def digits_mlp(hidden: int = 32, seed: int = 0) -> tuple[Any, float]:
    """(ONNX model, accuracy on the held-out fifth) of the trained digits classifier."""
    from onnx import TensorProto, helper, numpy_helper
    from sklearn.neural_network import MLPClassifier

    x, y = _data()
    train, test = _split(len(y))
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), solver="lbfgs", max_iter=300,
                        random_state=seed, alpha=1e-3)
    clf.fit(x[train] / 16.0, y[train])
    accuracy = float((clf.predict(x[test] / 16.0) == y[test]).mean())
    # the model takes grey levels 0..16 itself: fold the /16 into the first layer's weights
    w1 = (clf.coefs_[0] / 16.0).astype("float32")            # [64, hidden]
    b1 = clf.intercepts_[0].astype("float32")
    w2 = clf.coefs_[1].astype("float32")                     # [hidden, 10]
    b2 = clf.intercepts_[1].astype("float32")
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
             numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")]
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["output"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tvmpy.relay.testing.digits")
    model.ir_version = IR_VERSION
    return model, accuracy


def digits_samples(count: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """``count`` held-out images (float32 [count, 1, 8, 8], grey levels 0..16) and labels, the
    classes in turn (0, 1, ..., 9, 0, ...)."""
    x, y = _data()
    _, test = _split(len(y))
    by_class = [test[y[test] == c] for c in range(CLASSES)]
    pick = np.array([by_class[i % CLASSES][i // CLASSES] for i in range(count)])
    return x[pick].reshape(-1, 1, IMAGE, IMAGE), y[pick]
