"""Build of torch_tpu: setuptools drives CMake + Ninja.

The C++ extension `torch_tpu._C` is built by the top-level CMakeLists.txt in `build/` (kept
between builds, so rebuilds are incremental; ccache is picked up by CMake when installed). The
built `build/torch_tpu/_C.<soabi>.so` is then copied where setuptools expects the extension:
into the wheel, or into ./torch_tpu/ for an editable install.

    pip install --no-build-isolation -e .     # development (scripts/setup.sh does this)
    pip install --no-build-isolation .        # regular install

`--no-build-isolation` matters: an isolated build would download another torch.

Environment knobs:
    CMAKE_BUILD_PARALLEL_LEVEL   parallel compile jobs (default: ninja's own)
    TORCH_TPU_BUILD_TYPE         CMake build type (default: Release)
    TORCH_TPU_BUILD_DIR          CMake build directory (default: ./build)
    CMAKE_ARGS                   extra arguments for the CMake configure step
"""

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    """An extension whose sources are built by CMake, not by setuptools."""

    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


def _find_ninja():
    for candidate in (shutil.which("ninja"), Path(sys.executable).parent / "ninja"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def _torch_cmake_dir():
    """Torch's CMake config dir, found without importing torch (which is slow)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(
            "torch_tpu: torch is not installed in this Python (%s).\n"
            "Install it first (pip install torch==2.13.0) and build with "
            "`pip install --no-build-isolation ...`." % sys.executable
        )
    return Path(list(spec.submodule_search_locations)[0]) / "share" / "cmake" / "Torch"


def _read_cache(cache_file):
    values = {}
    if cache_file.is_file():
        for line in cache_file.read_text(errors="replace").splitlines():
            if line and not line.startswith(("#", "//")) and "=" in line and ":" in line:
                key_type, value = line.split("=", 1)
                values[key_type.split(":", 1)[0]] = value
    return values


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)

        build_dir = Path(os.environ.get("TORCH_TPU_BUILD_DIR", ROOT / "build")).resolve()
        build_dir.mkdir(parents=True, exist_ok=True)
        ninja = _find_ninja()
        if ninja is None:
            sys.exit("torch_tpu: ninja not found (apt-get install ninja-build; scripts/setup.sh "
                     "installs everything needed).")
        if shutil.which("cmake") is None:
            sys.exit("torch_tpu: cmake not found (apt-get install cmake).")

        build_type = os.environ.get("TORCH_TPU_BUILD_TYPE", "Release")
        args = [
            "-G", "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={ninja}",
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DTorch_DIR={_torch_cmake_dir()}",
            "-DTPU_BUILD_TORCH=ON",
            "-DTPU_BUILD_TESTS=OFF",
        ] + shlex.split(os.environ.get("CMAKE_ARGS", ""))

        env = os.environ.copy()
        # Lets ccache cache the translation units that use the precompiled torch header.
        env.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime,include_file_ctime")

        # A cache made by another source tree, generator or Python is dropped, not trusted.
        cache_file = build_dir / "CMakeCache.txt"
        cache = _read_cache(cache_file)
        if cache and (
            Path(cache.get("CMAKE_HOME_DIRECTORY", "")).resolve() != ROOT
            or cache.get("CMAKE_GENERATOR") != "Ninja"
            # another environment (python vs python3 of one venv is the same environment)
            or Path(cache.get("Python3_EXECUTABLE", "")).parent != Path(sys.executable).parent
        ):
            print(f"torch_tpu: dropping stale CMake cache in {build_dir}", flush=True)
            cache_file.unlink()
            shutil.rmtree(build_dir / "CMakeFiles", ignore_errors=True)

        # Configure when the arguments changed or nothing is configured yet; otherwise ninja
        # re-runs CMake by itself when a CMakeLists.txt (or a globbed directory) changed.
        stamp = build_dir / ".setup_py_cmake_args"
        stamp_text = "\n".join(args)
        if (not (build_dir / "build.ninja").is_file() or not cache_file.is_file()
                or not stamp.is_file() or stamp.read_text() != stamp_text):
            self._run(["cmake", "-S", str(ROOT), "-B", str(build_dir)] + args, env)
            stamp.write_text(stamp_text)

        build_cmd = ["cmake", "--build", str(build_dir), "--target", ext.target]
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in env and self.parallel:
            build_cmd += ["--parallel", str(self.parallel)]
        self._run(build_cmd, env)

        # Copy the built module where setuptools wants it (wheel staging dir, or the build_lib
        # that `inplace`/editable mode then copies into ./torch_tpu/).
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        basename = ext.name.split(".")[-1]
        built = build_dir / Path(*ext.name.split(".")[:-1]) / (basename + suffix)
        if not built.is_file():
            found = sorted((build_dir / Path(*ext.name.split(".")[:-1])).glob(basename + "*.so"))
            if len(found) != 1:
                sys.exit(f"torch_tpu: expected {built} after the CMake build, found {found}")
            built = found[0]
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        # copy to a temp name and rename: a running process may have the old .so mapped.
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copy2(built, tmp)
        os.replace(tmp, dest)
        print(f"torch_tpu: {built} -> {dest}", flush=True)

    @staticmethod
    def _run(cmd, env):
        print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)


readme = ROOT / "README.md"
setup(
    long_description=readme.read_text(encoding="utf-8") if readme.is_file() else "",
    long_description_content_type="text/markdown",
    ext_modules=[CMakeExtension("torch_tpu._C", target="_C")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
