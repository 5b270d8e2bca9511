"""What ``digits download`` knows about each standard dataset: files, checksums, mirrors.

The URLs are the datasets' official homes (and, for MNIST, the mirror
torchvision and most tools fall back on, since ``yann.lecun.com`` often
refuses downloads). The MD5 sums are the published ones that DIGITS users
and torchvision check against.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset as published.

    Attributes:
        name: The file name on the server (and in the local ``downloads/`` folder).
        md5: Its published MD5 sum (lower-case hex).
    """

    name: str
    md5: str


@dataclass(frozen=True)
class DatasetSpec:
    """A standard dataset ``digits download`` can fetch.

    Attributes:
        name: The command-line name (``mnist``, ``cifar10``, ``cifar100``).
        title: Human-readable name.
        homepage: Where the dataset is described.
        mirrors: Base URLs (ending with ``/``) tried in order; a file's URL is
            ``mirror + file.name``.
        files: The files to fetch.
        image_size: ``(height, width, channels)`` of the images.
        trees: Sub-folders holding one class tree each (``("",)`` for the
            top folder itself; CIFAR-100 has ``("fine", "coarse")``).
    """

    name: str
    title: str
    homepage: str
    mirrors: tuple[str, ...]
    files: tuple[RemoteFile, ...]
    image_size: tuple[int, int, int]
    trees: tuple[str, ...] = field(default=("",))

    def urls(self, remote: RemoteFile) -> list[str]:
        """Return the official URLs of one file, in the order they are tried."""
        return [mirror + remote.name for mirror in self.mirrors]


MNIST = DatasetSpec(
    name="mnist",
    title="MNIST handwritten digits",
    homepage="http://yann.lecun.com/exdb/mnist/",
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    files=(
        RemoteFile("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        RemoteFile("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        RemoteFile("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        RemoteFile("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ),
    image_size=(28, 28, 1),
)

CIFAR10 = DatasetSpec(
    name="cifar10",
    title="CIFAR-10 tiny images (10 classes)",
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    mirrors=("https://www.cs.toronto.edu/~kriz/",),
    files=(RemoteFile("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),),
    image_size=(32, 32, 3),
)

CIFAR100 = DatasetSpec(
    name="cifar100",
    title="CIFAR-100 tiny images (100 fine classes in 20 coarse classes)",
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    mirrors=("https://www.cs.toronto.edu/~kriz/",),
    files=(RemoteFile("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"),),
    image_size=(32, 32, 3),
    trees=("fine", "coarse"),
)

#: The datasets ``digits download`` knows, by name.
DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (MNIST, CIFAR10, CIFAR100)}
