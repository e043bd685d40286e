"""ResNet-50's (and ResNeXt's) convolution shapes, one conv + bias + relu each, tvmpy vs
onnxruntime (bench/conv_shapes.py's method: interleaved samples, I/O binding), with GFLOP/s.

    python bench/conv_resnet_shapes.py [--threads 1 --cpu-time] [--filter TEXT] [--samples 9]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_shapes as cs  # noqa: E402

# (in channels, out channels, input map, kernel, stride): torchvision ResNet-50 (stride on 3x3)
RESNET50 = [
    (64, 64, 56, 1, 1), (64, 64, 56, 3, 1), (64, 256, 56, 1, 1), (256, 64, 56, 1, 1),
    (256, 128, 56, 1, 1), (128, 128, 56, 3, 2), (128, 512, 28, 1, 1), (256, 512, 56, 1, 2),
    (512, 128, 28, 1, 1), (128, 128, 28, 3, 1),
    (512, 256, 28, 1, 1), (256, 256, 28, 3, 2), (256, 1024, 14, 1, 1), (512, 1024, 28, 1, 2),
    (1024, 256, 14, 1, 1), (256, 256, 14, 3, 1),
    (1024, 512, 14, 1, 1), (512, 512, 14, 3, 2), (512, 2048, 7, 1, 1), (1024, 2048, 14, 1, 2),
    (2048, 512, 7, 1, 1), (512, 512, 7, 3, 1),
    (3, 64, 224, 7, 2),
]

if __name__ == "__main__":
    cs.CASES = RESNET50
    cs.main()
