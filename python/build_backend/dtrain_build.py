"""A PEP 517 / PEP 660 build backend for the dtrain package, in the standard library alone:
pip builds in an isolated environment and would download setuptools for it, which an offline
machine cannot (pip install --no-index ./python). A pure-Python package of one folder needs no
more than this: a wheel is a zip of the package and its dist-info (METADATA, WHEEL, RECORD).
The name, description, Python and dependencies are pyproject.toml's [project]; the version is
dtrain/__init__.py's __version__."""
import base64
import hashlib
import io
import os
import re
import tarfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PACKAGE = "dtrain"
# a fixed date in every archive: the same sources give the same bytes
EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        p = tomllib.load(f)["project"]
    with open(os.path.join(HERE, PACKAGE, "__init__.py")) as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError(f"{PACKAGE}/__init__.py: no __version__ = \"X.Y.Z\" line")
    return p, m.group(1)


def _metadata():
    p, version = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {version}", f"Summary: {p['description']}",
             f"Requires-Python: {p['requires-python']}"] + [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    return p["name"], version, "\n".join(lines) + "\n"


def _sources():
    """The package's files: (path in the wheel, bytes), sorted; no caches."""
    out = []
    for folder, dirs, files in os.walk(os.path.join(HERE, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), f.read()))
    return out


def _dist_info(name, version):
    return f"{name}-{version}.dist-info"


def _write_wheel(wheel_directory, files):
    name, version, metadata = _metadata()
    info = _dist_info(name, version)
    files = files + [(f"{info}/METADATA", metadata.encode()),
                     (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: dtrain_build\nRoot-Is-Purelib: true\n"
                                       b"Tag: py3-none-any\n")]
    record = io.StringIO()
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{path},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files.append((f"{info}/RECORD", record.getvalue().encode()))
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            entry = zipfile.ZipInfo(path, EPOCH)
            entry.external_attr = 0o644 << 16
            z.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, metadata = _metadata()
    info = os.path.join(metadata_directory, _dist_info(name, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(metadata)
    return os.path.basename(info)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _sources())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel of one .pth file naming this folder: Python imports the checkout's own files."""
    return _write_wheel(wheel_directory, [(f"{PACKAGE}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = f"{name}-{version}"
    files = [("pyproject.toml", None), ("build_backend/dtrain_build.py", None)] + [(p, None) for p, _ in _sources()]
    out = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, out), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path, _ in files:
            tar.add(os.path.join(HERE, path), f"{base}/{path}", recursive=False)
        pkg = tarfile.TarInfo(f"{base}/PKG-INFO")
        pkg.size, pkg.mode = len(metadata.encode()), 0o644
        tar.addfile(pkg, io.BytesIO(metadata.encode()))
    return out
