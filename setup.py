"""Build script of marionette_control (ament_python package with a C++ core).

The C++17/Eigen core under ``cpp/`` is compiled into the extension module
``marionette_control._core`` with pybind11. The same file serves three ways
of building:

* ``./run`` (plain Debian/Ubuntu, PyPI only): ``pip install
  --no-build-isolation -e .`` once, then ``python setup.py build_ext
  --inplace`` whenever a file under ``cpp/`` changes;
* ``colcon build [--symlink-install]`` in a ROS 2 workspace;
* ``pip install .`` into any environment that has pybind11 and Eigen.

Eigen is looked up at build time (not when this file is merely read, so
``egg_info`` and ``sdist`` work without it), in this order:
``$EIGEN3_INCLUDE_DIR``, the system's ``/usr/include/eigen3`` (Debian
``libeigen3-dev``, rosdep key ``eigen``), the PyPI package ``cmeel-eigen``.

Environment: ``MARIONETTE_BUILD_JOBS`` sets the number of translation units
compiled in parallel (default 2, the size of the project's machines).
"""

import glob
import os
import re
import site
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.errors import SetupError  # printed as "error: ..." by setup()
except ImportError:
    SetupError = RuntimeError

try:
    from pybind11.setup_helpers import ParallelCompile, Pybind11Extension
except ImportError:
    # A ROS machine may have only the pybind11 headers (Debian pybind11-dev),
    # not the Python package; the extension then builds as a plain one.
    ParallelCompile = None
    Pybind11Extension = None

PACKAGE = "marionette_control"
HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_EIGEN = "/usr/include/eigen3"
CMEEL_EIGEN = os.path.join("cmeel.prefix", "include", "eigen3")

# -frecord-gcc-switches keeps the compiler's command line in the .so (section
# .GCC.command.line), so the flags of a built core can be checked afterwards.
CXX_FLAGS = ["-O3", "-DNDEBUG", "-fvisibility=hidden", "-frecord-gcc-switches"]


def _read_version():
    with open(os.path.join(HERE, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        match = re.search(r'^__version__ = "([^"]+)"', f.read(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no __version__ = \"...\" line in {PACKAGE}/__init__.py")
    return match.group(1)


def _rel(path):
    return os.path.relpath(path, HERE)


def _core_sources():
    """Every translation unit of the core: cpp/src/*.cpp then cpp/bindings/*.cpp."""
    sources = []
    for sub in ("src", "bindings"):
        sources += sorted(glob.glob(os.path.join(HERE, "cpp", sub, "*.cpp")))
    if not any(os.sep + "bindings" + os.sep in s for s in sources):
        raise RuntimeError(
            "no pybind11 binding sources found: expected cpp/bindings/*.cpp "
            f"(with PYBIND11_MODULE(_core, m)) under {HERE}"
        )
    return [_rel(s) for s in sources]


def _has_eigen(include_dir):
    return os.path.isfile(os.path.join(include_dir, "Eigen", "Core"))


def _eigen_include_dir():
    """Directory that holds Eigen/Core; raises with both ways to get one."""
    override = os.environ.get("EIGEN3_INCLUDE_DIR")
    if override:
        if not _has_eigen(override):
            raise SetupError(
                f"EIGEN3_INCLUDE_DIR={override} does not contain Eigen/Core"
            )
        return override
    if _has_eigen(SYSTEM_EIGEN):
        return SYSTEM_EIGEN
    # cmeel-eigen installs its headers under <site-packages>/cmeel.prefix/.
    candidates = []
    try:
        from importlib import metadata

        dist = metadata.distribution("cmeel-eigen")
        candidates.append(str(dist.locate_file(CMEEL_EIGEN)))
    except Exception:  # not installed, or metadata unreadable: try the paths
        pass
    roots = list(sys.path)
    try:
        roots += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # site of old virtualenvs lacks these
        pass
    candidates += [os.path.join(root, CMEEL_EIGEN) for root in roots if root]
    for candidate in candidates:
        if _has_eigen(candidate):
            return candidate
    raise SetupError(
        "Eigen 3 headers not found (need Eigen/Core). Either install the "
        f"system package (Debian/Ubuntu: apt-get install libeigen3-dev -> "
        f"{SYSTEM_EIGEN}; rosdep key 'eigen'), or the PyPI package into this "
        f"Python (python -m pip install cmeel-eigen -> site-packages/"
        f"{CMEEL_EIGEN}), or set EIGEN3_INCLUDE_DIR. Python: {sys.executable}"
    )


HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".ipp", ".tpp", ".inl")
_newest_dependency = None


def _core_headers():
    """Every header under cpp/ (relative paths): the extension depends on them (build_ext skips an extension
    none of whose sources or dependencies is newer than it)."""
    return sorted(_rel(os.path.join(root, name)) for root, _, files in os.walk(os.path.join(HERE, "cpp"))
                  for name in files if name.endswith(HEADER_SUFFIXES))


def _needs_recompile(obj, src):
    """Recompile a translation unit when it, any header under cpp/, or this
    script is newer than its object (pybind11's naive check ignores headers,
    which would leave stale objects after a header edit)."""
    global _newest_dependency
    if _newest_dependency is None:
        _newest_dependency = max([os.path.getmtime(os.path.abspath(__file__))] +
                                 [os.path.getmtime(os.path.join(HERE, h)) for h in _core_headers()])
    return os.path.getmtime(obj) < max(os.path.getmtime(src), _newest_dependency)


class BuildExt(build_ext):
    """build_ext that adds the Eigen include directory when it actually builds."""

    def build_extensions(self):
        eigen = _eigen_include_dir()
        for ext in self.extensions:
            if eigen not in ext.include_dirs:
                ext.include_dirs.append(eigen)
        super().build_extensions()


def _core_extension():
    kwargs = dict(
        sources=_core_sources(),
        depends=_core_headers(),
        include_dirs=[os.path.join("cpp", "include")],
        extra_compile_args=list(CXX_FLAGS),
    )
    if Pybind11Extension is not None:
        return Pybind11Extension(f"{PACKAGE}._core", cxx_std=17, **kwargs)
    kwargs["extra_compile_args"] = ["-std=c++17", "-g0"] + kwargs["extra_compile_args"]
    return Extension(f"{PACKAGE}._core", language="c++", **kwargs)


def _data_files():
    share = os.path.join("share", PACKAGE)
    files = [
        (
            os.path.join("share", "ament_index", "resource_index", "packages"),
            [os.path.join("resource", PACKAGE)],
        ),
        (share, ["package.xml"]),
    ]
    launch = sorted(_rel(p) for p in glob.glob(os.path.join(HERE, "launch", "*.launch.py")))
    if launch:
        files.append((os.path.join(share, "launch"), launch))
    for root, dirs, names in os.walk(os.path.join(HERE, "config")):
        dirs.sort()
        entries = [_rel(os.path.join(root, n)) for n in sorted(names) if n != ".gitkeep"]
        if entries:
            files.append((os.path.join(share, _rel(root)), entries))
    return files


if ParallelCompile is not None:
    ParallelCompile(
        "MARIONETTE_BUILD_JOBS", default=2, needs_recompile=_needs_recompile
    ).install()

setup(
    name=PACKAGE,
    version=_read_version(),
    description=(
        "Trajectory optimization and real-time tracking for string-actuated "
        "marionettes (C++ variational-integrator core, ROS 2 nodes)"
    ),
    license="Apache-2.0",
    maintainer="marionette_control maintainers",
    maintainer_email="maintainers@users.noreply.a-seed-df436438.example",
    python_requires=">=3.10",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    package_data={"": ["*.yaml", "*.urdf"]},
    ext_modules=[_core_extension()],
    cmdclass={"build_ext": BuildExt},
    data_files=_data_files(),
    # Runtime dependencies come from package.xml (rosdep) or requirements/.
    install_requires=["setuptools"],
    zip_safe=False,
    entry_points={
        "console_scripts": [
            # ROS 2 nodes (`ros2 run marionette_control <name>`)
            "marionette_simulator = marionette_control.nodes.simulator:main",
            "marionette_optimizer = marionette_control.nodes.optimizer:main",
            "marionette_controller = marionette_control.nodes.controller:main",
            "marionette_mpc = marionette_control.nodes.mpc:main",
            "marionette_replanning = marionette_control.nodes.replanning:main",
            "marionette_bringup = marionette_control.cli.bringup:main",
            # tools
            "marionette-optimize = marionette_control.cli.optimize:main",
            "marionette-simulate = marionette_control.cli.simulate:main",
            "marionette-track-offline = marionette_control.cli.track_offline:main",
            "marionette-plot = marionette_control.cli.plot:main",
            "marionette-bag-record = marionette_control.cli.bag_record:main",
            "marionette-bag-play = marionette_control.cli.bag_play:main",
            "marionette-bag-summary = marionette_control.cli.bag_summary:main",
            "marionette-bag-replay = marionette_control.cli.bag_replay:main",
            "marionette-calibrate = marionette_control.cli.calibrate:main",
        ]
    },
)
