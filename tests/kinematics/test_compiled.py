"""`release_compiler_pages`: LLVM's code is handed back once the kernels are loaded, and the
kernels still run, without LLVM, giving the same answers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kinematics.compiled import _clean_mappings, release_compiler_pages

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
