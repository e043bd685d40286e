"""Convolutional networks: torchvision's definitions (and timm's ConvMixer), random weights.

``small`` keeps every layer type of the architecture (its block kinds, grouped / depthwise /
dilated convolutions, squeeze-and-excitation, activations) with fewer blocks, narrower
channels and 32-64 pixel images; ``real`` is the published configuration at its input size.
"""

from __future__ import annotations

from typing import Any

from ._common import finish, image, seeded
from ._shim import torchvision
from .spec import Spec


def _m() -> Any:
    return torchvision().models


def resnet50(size: str) -> Spec:
    m = _m()
    seeded()
    if size == "real":
        return finish(m.resnet50(), image(224))
    net = m.resnet.ResNet(m.resnet.Bottleneck, [1, 1, 1, 1], num_classes=10, width_per_group=16)
    return finish(net, image(32))


def resnet18(size: str) -> Spec:
    m = _m()
    seeded(1)
    if size == "real":
        return finish(m.resnet18(), image(224))
    return finish(m.resnet.ResNet(m.resnet.BasicBlock, [1, 1, 1, 1], num_classes=10), image(32))


def resnext_dilated(size: str) -> Spec:
    """ResNeXt (grouped 3x3 convolutions) with its last two stages dilated instead of strided
    (output stride 8, dilations 2 and 4), as segmentation backbones use it."""
    m = _m()
    seeded(2)
    if size == "real":
        net = m.resnext50_32x4d(replace_stride_with_dilation=[False, True, True])
        return finish(net, image(224))
    net = m.resnet.ResNet(m.resnet.Bottleneck, [1, 1, 1, 1], groups=4, width_per_group=4,
                          num_classes=10, replace_stride_with_dilation=[False, True, True])
    return finish(net, image(32))


def _mobilenet_v3(arch: str, size: str, seed: int) -> Spec:
    mv3 = _m().mobilenetv3
    seeded(seed)
    if size == "real":
        return finish(getattr(_m(), arch)(), image(224))
    setting, last = mv3._mobilenet_v3_conf(arch, width_mult=0.25)
    return finish(mv3.MobileNetV3(setting, last, num_classes=10), image(32))


def mobilenet_v3_large(size: str) -> Spec:
    return _mobilenet_v3("mobilenet_v3_large", size, 3)


def mobilenet_v3_small(size: str) -> Spec:
    return _mobilenet_v3("mobilenet_v3_small", size, 4)


def efficientnet_b0(size: str) -> Spec:
    ef = _m().efficientnet
    seeded(5)
    if size == "real":
        return finish(_m().efficientnet_b0(), image(224))
    setting, last = ef._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return finish(ef.EfficientNet(setting, 0.2, num_classes=10, last_channel=last), image(32))


def regnet_y_400mf(size: str) -> Spec:
    rg = _m().regnet
    seeded(6)
    if size == "real":
        return finish(_m().regnet_y_400mf(), image(224))
    params = rg.BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8,
                                             se_ratio=0.25)
    return finish(rg.RegNet(params, num_classes=10, stem_width=8), image(32))


def shufflenet_v2(size: str) -> Spec:
    m = _m()
    seeded(7)
    if size == "real":
        return finish(m.shufflenet_v2_x1_0(), image(224))
    return finish(m.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10), image(32))


def densenet121(size: str) -> Spec:
    m = _m()
    seeded(8)
    if size == "real":
        return finish(m.densenet121(), image(224))
    net = m.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16,
                     bn_size=2, num_classes=10)
    return finish(net, image(32))


def googlenet(size: str) -> Spec:
    """GoogLeNet (Inception-v1); small: its stem and three of its Inception blocks (1x1, 3x3,
    5x5 branches and the max-pool projection; ceil-mode pooling between) at 1/8 the width."""
    m = _m()
    seeded(9)
    if size == "real":
        return finish(m.GoogLeNet(aux_logits=False, init_weights=True), image(224))
    import importlib

    import torch.nn as nn

    g = importlib.import_module("torchvision.models.googlenet")  # (m.googlenet: the builder)
    net = nn.Sequential(
        g.BasicConv2d(3, 8, kernel_size=7, stride=2, padding=3),
        nn.MaxPool2d(3, stride=2, ceil_mode=True),
        g.BasicConv2d(8, 24, kernel_size=3, padding=1),
        g.Inception(24, 8, 12, 16, 2, 4, 4),            # 32 channels
        g.Inception(32, 16, 16, 24, 4, 12, 8),          # 60
        nn.MaxPool2d(3, stride=2, ceil_mode=True),
        g.Inception(60, 24, 12, 26, 2, 6, 8),           # 64
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(64, 10))
    return finish(net, image(32))


def inception_v3(size: str) -> Spec:
    """Inception-v3 (factorised 1x7 / 7x1 convolutions, four kinds of mixed blocks); small:
    a stem and one block of each kind (A, B, C, D, E) from torchvision's definitions."""
    m = _m()
    seeded(10)
    if size == "real":
        return finish(m.Inception3(aux_logits=False, init_weights=True), image(299))
    import torch.nn as nn

    inc = m.inception
    net = nn.Sequential(
        inc.BasicConv2d(3, 16, kernel_size=3, stride=2), inc.BasicConv2d(16, 16, kernel_size=3),
        inc.InceptionA(16, pool_features=8),            # 64 + 64 + 96 + 8 = 232 channels
        inc.InceptionB(232),                            # 384 + 96 + 232 = 712
        inc.InceptionC(712, channels_7x7=16),           # 4 * 192 = 768
        inc.InceptionD(768),                            # 320 + 192 + 768 = 1280
        inc.InceptionE(1280),                           # 2048
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 10))
    return finish(net, image(35))


def convnext_tiny(size: str) -> Spec:
    m = _m()
    cn = m.convnext
    seeded(11)
    if size == "real":
        return finish(m.convnext_tiny(), image(224))
    cfg = [cn.CNBlockConfig(16, 32, 1), cn.CNBlockConfig(32, 64, 1), cn.CNBlockConfig(64, 128, 1),
           cn.CNBlockConfig(128, None, 1)]
    return finish(cn.ConvNeXt(cfg, num_classes=10, layer_scale=0.5), image(32))


def squeezenet1_1(size: str) -> Spec:
    m = _m()
    seeded(12)
    return finish(m.squeezenet1_1(num_classes=1000 if size == "real" else 10),
                  image(224 if size == "real" else 48))


def mnasnet(size: str) -> Spec:
    m = _m()
    seeded(13)
    return finish(m.MNASNet(1.0 if size == "real" else 0.25, num_classes=10),
                  image(224 if size == "real" else 32))


def vgg11_bn(size: str) -> Spec:
    m = _m()
    seeded(14)
    if size == "real":
        return finish(m.vgg11_bn(), image(224))
    import torch.nn as nn

    feats = m.vgg.make_layers([8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"],
                              batch_norm=True)
    net = m.VGG(feats, num_classes=10)
    net.avgpool = nn.AdaptiveAvgPool2d((1, 1))  # 32x32 -> 1x1 after five pools
    net.classifier = nn.Sequential(nn.Linear(64, 32), nn.ReLU(True), nn.Dropout(),
                                   nn.Linear(32, 10))
    return finish(net, image(32))


def convmixer(size: str) -> Spec:
    """timm's ConvMixer: a patch embedding, then large-kernel depthwise convs (9x9) + GELU +
    BatchNorm in residual blocks, pointwise convs between."""
    from timm.models.convmixer import ConvMixer

    seeded(15)
    if size == "real":
        return finish(ConvMixer(768, 32, kernel_size=7, patch_size=7, num_classes=1000),
                      image(224))
    return finish(ConvMixer(32, 2, kernel_size=9, patch_size=4, num_classes=10), image(32))
