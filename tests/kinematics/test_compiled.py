"""`release_compiler_pages`: LLVM's code is handed back once the kernels are loaded, and the
kernels still run, without LLVM, giving the same answers. numba's cache never serves kernels
compiled from older sources (`kinematics.kernel_cache`): a helper changed in another module than
the kernel's is compiled again, where numba alone would serve the old code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kinematics.compiled import _clean_mappings, release_compiler_pages
from kinematics.kernel_cache import PYTHON_TAG, kernel_sources

ROOT = Path(__file__).resolve().parents[2]

SMAPS = """\
7f0000000000-7f0000100000 r--p 00000000 08:01 42 /venv/llvmlite/binding/libllvmlite.so
Rss:                 400 kB
Private_Dirty:         0 kB
7f0000100000-7f0000900000 r-xp 00100000 08:01 42 /venv/llvmlite/binding/libllvmlite.so
Rss:                5000 kB
Private_Dirty:         0 kB
7f0000900000-7f0000a00000 r--p 00900000 08:01 42 /venv/llvmlite/binding/libllvmlite.so
Rss:                1024 kB
Private_Dirty:      1024 kB
7f0000a00000-7f0000a10000 rw-p 00a00000 08:01 42 /venv/llvmlite/binding/libllvmlite.so
Rss:                  64 kB
Private_Dirty:        64 kB
7f0000b00000-7f0000c00000 r-xp 00000000 08:01 43 /venv/numpy/_multiarray_umath.so
Rss:                 800 kB
Private_Dirty:         0 kB
7f0000c00000-7f0000d00000 rw-p 00000000 00:00 0
Rss:                1024 kB
Private_Dirty:      1024 kB
"""


def test_only_the_librarys_clean_read_only_mappings_are_chosen() -> None:
    assert _clean_mappings(SMAPS, "libllvmlite") == [
        (0x7F0000000000, 0x7F0000100000, 400 * 1024),  # headers, constants
        (0x7F0000100000, 0x7F0000900000, 5000 * 1024),  # code
    ]  # not the relocated read-only data (dirty: paging out would swap it), not the data
    assert _clean_mappings(SMAPS, "libnothing") == []
    assert _clean_mappings("", "libllvmlite") == []


def test_no_smaps_releases_nothing(tmp_path: Path) -> None:
    assert release_compiler_pages(tmp_path / "absent") == 0


RUN_AFTER_RELEASE = textwrap.dedent(
    """
    import json, re
    from pathlib import Path
    import numpy as np
    from kinematics import load_tree, solve_ik
    from kinematics.compiled import release_compiler_pages

    def llvm_resident():
        total, mine = 0, False
        for line in Path("/proc/self/smaps").read_text().splitlines():
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                mine = "libllvmlite" in line
            elif mine and line.startswith("Rss:"):
                total += int(line.split()[1])
        return total

    tree = load_tree("config/robots/ur5.urdf")
    link = "tool0"
    home = np.array([0.0, -np.pi / 2, np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0])
    before = tree.fk(home, link).matrix.tolist()
    released = release_compiler_pages()
    after_release = llvm_resident()
    pose = tree.fk(home, link)
    solution = solve_ik(tree, pose, home + 0.1, link)
    print(json.dumps({
        "released": released, "after_release": after_release, "after_use": llvm_resident(),
        "same_fk": pose.matrix.tolist() == before, "ik": bool(solution.success),
        "ik_error": float(np.abs(tree.fk(solution.q, link).matrix - np.asarray(before)).max()),
    }))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise(MADV_PAGEOUT): Linux")
def test_the_kernels_run_without_llvm_after_the_release() -> None:
    """In a process of its own (this one keeps LLVM for the other tests)."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_AFTER_RELEASE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found = json.loads(result.stdout)
    assert found["released"] > 0  # LLVM's code was resident and advised
    assert found["same_fk"]
    assert found["ik"]
    assert found["ik_error"] < 1e-6
    # Running FK and IK touched none of LLVM's pages (no more of it resident than after the
    # release; pages that other processes share may stay resident, so not necessarily zero).
    assert found["after_use"] <= found["after_release"]


# numba's cache never serves kernels compiled from older sources. A real kernel that calls a helper
# of another module: `_segment_segment` (kinematics.collision._shape_kernels) gives the signed
# distance of two capsules through `segment_segment` (kinematics.collision._primitive_kernels).
# Each step runs in a process of its own (numba reads NUMBA_CACHE_DIR at import) on a copy of the
# package, whose helper the test edits as an upgrade would.
CAPSULES = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numba as nb
    import numpy as np
    import kinematics
    from kinematics.collision import _layout as lay
    from kinematics.collision._shape_kernels import _segment_segment
    from kinematics.compiled import compile_entries
    from kinematics.kernel_cache import stamp_name

    mode, *blocked = sys.argv[1:]
    folder = Path(_segment_segment.stats.cache_path)
    for stem in blocked:  # a folder where the stamp should be: the stamp cannot be written
        stamp = folder / stamp_name(stem)
        if stamp.is_file():
            stamp.unlink()
        stamp.mkdir(exist_ok=True)
    signature = nb.float64(nb.float64[:, ::1], nb.int64, nb.int64, nb.float64[::1])
    lines = []
    if mode == "stamped":
        entries = {"segment_segment": (_segment_segment, signature)}
        kernel = compile_entries(entries, lines.append, "cold", "test kernels")["segment_segment"]
    else:  # numba alone
        kernel = _segment_segment.compile(signature)
    world = np.zeros((2, lay.SROW))
    for row, (y, radius) in enumerate([(0.0, 0.1), (1.0, 0.2)]):  # parallel, 1 m apart
        world[row, lay.P0 : lay.P0 + 3] = (0.0, y, 0.0)
        world[row, lay.P1 : lay.P1 + 3] = (1.0, y, 0.0)
        world[row, lay.RADIUS] = radius
    print(json.dumps({
        "package": kinematics.__file__, "folder": str(folder), "lines": lines,
        "distance": kernel(world, 0, 1, np.zeros(6)),
        "compiled": sum(_segment_segment.stats.cache_misses.values()),
    }))
    """
)
DISTANCE_M = 1.0 - 0.1 - 0.2
HELPER = Path("kinematics", "collision", "_primitive_kernels.py")
RESULT = "    return length - r1 - r2\n"  # segment_segment's result


def _copy_package(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    shutil.copytree(ROOT / "kinematics", source / "kinematics", ignore=_no_caches)
    return source


def _no_caches(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__"]


def _shift_helper(source: Path, shift_m: float) -> None:
    """Edit segment_segment in the copy as an upgrade could: its distances `shift_m` larger."""
    path = source / HELPER
    text = path.read_text(encoding="utf-8")
    assert text.count(RESULT) == 1, f"{HELPER}: {RESULT.strip()!r} not found once: update the test"
    path.write_text(text.replace(RESULT, f"{RESULT.rstrip()} + {shift_m!r}\n"), encoding="utf-8")


def _capsules(tmp_path: Path, source: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(source)}
    done = subprocess.run(
        [sys.executable, "-c", CAPSULES, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    assert Path(found["package"]).is_relative_to(source)  # the copy, not this checkout
    found["stderr"] = done.stderr
    return found


def test_a_changed_helper_is_compiled_again_where_numba_alone_serves_the_old(
    tmp_path: Path,
) -> None:
    source = _copy_package(tmp_path)
    first = _capsules(tmp_path, source, "stamped")
    assert first["compiled"] == 1
    assert first["distance"] == pytest.approx(DISTANCE_M, abs=1e-12)

    _shift_helper(source, 0.25)
    stale = _capsules(tmp_path, source, "numba")
    assert stale["compiled"] == 0  # the entry's own file is unchanged: numba serves its old code
    assert stale["distance"] == pytest.approx(DISTANCE_M, abs=1e-12)

    folder = Path(first["folder"])
    others = [
        folder / f"_other_module.f-1.{PYTHON_TAG}.nbi",  # another module's, in the same folder
        folder / "_shape_kernels.f-1.py30.nbi",  # another Python's (stamped on its own)
        # another program's, in a shared NUMBA_CACHE_DIR
        folder.parent / "elsewhere_0123" / f"_shape_kernels.f-1.{PYTHON_TAG}.nbi",
    ]
    for path in others:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"not armd's")
    fresh = _capsules(tmp_path, source, "stamped")
    assert fresh["compiled"] == 1
    assert fresh["distance"] == pytest.approx(DISTANCE_M + 0.25, abs=1e-12)
    said = [line for line in fresh["lines"] if line.startswith("numba's cache")]
    assert len(said) == 2, fresh["lines"]  # segment_segment's module and _segment_segment's
    assert all("kinematics.collision._primitive_kernels changed" in line for line in said)
    assert all(path.read_bytes() == b"not armd's" for path in others)

    warm = _capsules(tmp_path, source, "stamped")
    assert warm["compiled"] == 0
    assert warm["lines"] == []
    assert warm["distance"] == pytest.approx(DISTANCE_M + 0.25, abs=1e-12)


def test_where_the_stamp_cannot_be_written_the_kernels_compile_without_the_cache(
    tmp_path: Path,
) -> None:
    source = _copy_package(tmp_path)
    _capsules(tmp_path, source, "stamped")
    _shift_helper(source, 0.25)
    found = _capsules(tmp_path, source, "stamped", "_shape_kernels")
    assert found["compiled"] == 1  # not the stale entry: compiled, in memory only
    assert found["distance"] == pytest.approx(DISTANCE_M + 0.25, abs=1e-12)
    assert "kinematics.collision._shape_kernels" in found["stderr"]
    assert "compile without the cache" in found["stderr"]


def test_a_kernels_sources_are_the_modules_it_reaches_through_imports() -> None:
    """Helpers and layout constants, through ``from module import name``, ``from package import
    module`` and other helpers; not the packages' __init__ (which imports everything)."""
    collision = kernel_sources("kinematics.collision._kernels")
    assert set(collision) >= {
        "kinematics.collision._kernels",
        "kinematics.collision._shape_kernels",
        "kinematics.collision._primitive_kernels",  # through _shape_kernels
        "kinematics.collision._layout",
        "kinematics._kernels",
        "kinematics._layout",
    }
    assert set(kernel_sources("kinematics.dynamics._coriolis_kernels")) >= {
        "kinematics.dynamics._coriolis_kernels",
        "kinematics.dynamics._kernels",
        "kinematics._kernels",
        "kinematics._layout",
    }
    assert set(kernel_sources("kinematics._ik_kernels")) >= {
        "kinematics._ik_kernels",
        "kinematics._kernels",
        "kinematics._layout",
    }
    for name in ("kinematics.collision._kernels", "kinematics._ik_kernels"):
        reached = set(kernel_sources(name))
        assert not reached & {"kinematics", "kinematics.collision", "kinematics.tree"}
    assert collision["kinematics.collision._layout"] == str(
        ROOT / "kinematics" / "collision" / "_layout.py"
    )


PROBE_PACKAGE = {
    "__init__.py": "from probe_kernels.entry import run\n",
    "entry.py": textwrap.dedent(
        """
        from __future__ import annotations
        import math
        from . import helper
        from .consts import SCALE
        try:
            import probe_kernels.optional
        except ImportError:
            pass

        def run(x):
            from probe_kernels import lazy  # Python only: no compiled code reaches it
            return helper.twice(x) * SCALE + math.pi + lazy.ONE
        """
    ),
    "helper.py": "from probe_kernels.sub import deep\n\ndef twice(x):\n    return deep.f(x)\n",
    "consts.py": "SCALE = 2.0\n",
    "optional.py": "",
    "lazy.py": "ONE = 1\n",
    "unrelated.py": "",
    "sub/__init__.py": "",
    "sub/deep.py": "def f(x):\n    return 2 * x\n",
}


def test_relative_imports_and_blocks_count_but_imports_in_functions_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in PROBE_PACKAGE.items():
        path = tmp_path / "probe_kernels" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = kernel_sources("probe_kernels.entry")
    assert set(found) == {
        "probe_kernels.entry",
        "probe_kernels.helper",
        "probe_kernels.consts",
        "probe_kernels.optional",
        "probe_kernels.sub.deep",
    }
    assert found["probe_kernels.sub.deep"] == str(tmp_path / "probe_kernels" / "sub" / "deep.py")
