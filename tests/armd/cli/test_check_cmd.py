"""``armd check``: the summary, driver availability, ``--probe``, and how problems are reported."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from armd.cli import check_cmd
from armd.config.load import ArmSetup
from drivers import DeviceState, Driver
from drivers.sim.driver import SimDriver

CONFIG = Path(__file__).resolve().parents[3] / "config"
SIM = CONFIG / "sim.yaml"
EXAMPLE = CONFIG / "armd.example.yaml"
UR5_HOME = {  # config/sim.yaml's initial joint positions, rad
    "shoulder_pan_joint": 0.0,
    "shoulder_lift_joint": -1.5708,
    "elbow_joint": 1.5708,
    "wrist_1_joint": -1.5708,
    "wrist_2_joint": -1.5708,
    "wrist_3_joint": 0.0,
}


def check(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="armd")
    check_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["check", *argv])
    code: int = args.func(args)
    return code


def test_sim_config_checks_ok_and_prints_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--config", str(SIM)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "arm       ur5-sim  (MQTT topics armd/ur5-sim/...)" in out
    assert "ur5, 6 DOF, tool link tool0" in out
    assert "loop 250 Hz, telemetry 25 Hz" in out
    assert "127.0.0.1:1883, client id armd-ur5-sim" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "_joint " in line}
    assert set(rows) == set(UR5_HOME)
    #                   driver/device    gear  sign  offset lower    upper   vel    acc  jerk
    assert rows["shoulder_lift_joint"][1:] == [
        "sim/shoulder",
        "4",
        "+1",
        "0",
        "-6.283",
        "6.283",
        "3.15",
        "4",
        "80",
    ]
    assert rows["elbow_joint"][5:7] == ["-3.142", "3.142"]
    assert rows["wrist_2_joint"][3] == "-1"
    assert out.splitlines()[-1] == f"{SIM}: OK (devices not contacted: see --probe)"


def test_probe_reads_every_device_once_and_never_enables(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(self: SimDriver) -> None:
        raise AssertionError("armd check --probe must never enable")

    monkeypatch.setattr(SimDriver, "_enable", refuse)
    assert check("--config", str(SIM), "--probe") == 0
    out, err = capsys.readouterr()
    assert err == ""
    # the rows, without the header, the driver's cycle line and "OK"
    probe = out.split("probe ", 1)[1].splitlines()[2:-2]
    assert len(probe) == 6
    for line in probe:
        joint, _device, _motor, position, unit = line.split()
        assert unit == "rad"
        assert float(position) == pytest.approx(UR5_HOME[joint], abs=1e-3)
    motors = {line.split()[0]: float(line.split()[2]) for line in probe}
    assert motors["shoulder_lift_joint"] == pytest.approx(-6.2832, abs=1e-3)  # gear ratio 4
    assert motors["wrist_2_joint"] == pytest.approx(1.5708, abs=1e-3)  # sign -1
    cycle = out.splitlines()[-2]
    assert cycle.startswith("driver sim: one read cycle p50 "), cycle
    assert cycle.endswith("(50 reads; the loop period is 4.00 ms)"), cycle
    assert "warning" not in out
    assert out.splitlines()[-1] == f"{SIM}: OK"


Sabotage = Callable[[SimDriver], None]


@pytest.fixture
def sabotage(monkeypatch: pytest.MonkeyPatch) -> list[Sabotage]:
    """Functions applied to the drivers `armd check --probe` builds, before it uses them."""
    actions: list[Sabotage] = []
    real = check_cmd.build_drivers

    def build(setup: ArmSetup) -> dict[str, Driver]:
        drivers = real(setup)
        for driver in drivers.values():
            assert isinstance(driver, SimDriver)
            for action in actions:
                action(driver)
        return drivers

    monkeypatch.setattr(check_cmd, "build_drivers", build)
    return actions


def test_probe_warns_when_a_read_cycle_leaves_less_than_half_the_period(
    capsys: pytest.CaptureFixture[str], sabotage: list[Sabotage]
) -> None:
    """Issue 10, item 8: a bus too slow for `loop_hz` made the loop miss most of its ticks
    without a word."""

    def slow(driver: SimDriver) -> None:
        read = driver.read

        async def slow_read() -> Mapping[str, DeviceState]:
            time.sleep(0.0025)  # a slow serial bus: 2.5 ms of a 4 ms period
            return await read()

        driver.read = slow_read  # type: ignore[method-assign]

    sabotage.append(slow)
    assert check("--config", str(SIM), "--probe") == 0  # a warning, not an error
    out, _ = capsys.readouterr()
    warning = out.splitlines()[-2]
    assert warning.startswith("warning: driver sim: a read cycle takes more than half"), out
    assert "set loop_hz to " in warning


def test_probe_reports_a_driver_that_does_not_open(
    capsys: pytest.CaptureFixture[str], sabotage: list[Sabotage]
) -> None:
    sabotage.append(lambda driver: setattr(driver.link("elbow"), "disconnected", True))
    assert check("--config", str(SIM), "--probe") == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"{SIM}: drivers.sim: probe: sim: cannot open: device(s) ['elbow'] disconnected"
    ]
    assert "Traceback" not in out + err


def test_probe_reports_a_device_that_does_not_answer(
    capsys: pytest.CaptureFixture[str], sabotage: list[Sabotage], monkeypatch: pytest.MonkeyPatch
) -> None:
    sabotage.append(lambda driver: setattr(driver.link("wrist3"), "drop_probability", 1.0))
    monkeypatch.setattr(check_cmd, "PROBE_TIMEOUT_S", 0.1)
    assert check("--config", str(SIM), "--probe") == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"{SIM}: drivers.sim.params.devices.wrist3: probe: no reply"]
    assert ["wrist_3_joint", "sim/wrist3", "no", "reply"] in [
        line.split() for line in out.splitlines()
    ]


@pytest.mark.skipif(
    os.path.exists("/dev/ttyUSB0") or os.path.exists("/sys/class/net/can0"),
    reason="this machine has the example's hardware",
)
def test_example_config_passes_without_hardware_and_names_what_probe_needs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = [
        "drivers.can0.params.channel: no network interface 'can0' (is the CAN adapter plugged "
        "in? `ip link` lists them); then bring it up: `sudo ip link set can0 up type can "
        "bitrate <bits/s>`",
        "drivers.servos.params.port: /dev/ttyUSB0: no such device (is the adapter plugged in? "
        "see /dev/serial/by-id/)",
    ]
    assert check("--config", str(EXAMPLE)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    notes = [line for line in out.splitlines() if line.startswith("hardware")]
    assert notes == [f"hardware  not found (required by --probe and run): {m}" for m in missing]
    assert out.splitlines()[-1] == f"{EXAMPLE}: OK (devices not contacted: see --probe)"

    assert check("--config", str(EXAMPLE), "--probe") == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"{EXAMPLE}: {m}" for m in missing]
    assert "arm       ur5-example" in out  # the summary is still printed


def test_example_config_checks_ok_where_its_hardware_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example with a pty for its serial port and python-can's virtual bus for its CAN."""
    main, sub = os.openpty()
    try:
        text = EXAMPLE.read_text(encoding="utf-8")
        replaced = {
            "model: robots/ur5.urdf": f"model: {CONFIG / 'robots/ur5.urdf'}",
            "geometry: collision/ur5.yaml": f"geometry: {CONFIG / 'collision/ur5.yaml'}",
            "port: /dev/ttyUSB0": f"port: {os.ttyname(sub)}",
            "interface: socketcan": "interface: virtual",
        }
        for old, new in replaced.items():
            assert old in text
            text = text.replace(old, new)
        config = tmp_path / "example.yaml"
        config.write_text(text, encoding="utf-8")
        assert check("--config", str(config)) == 0
    finally:
        os.close(main)
        os.close(sub)
    out, err = capsys.readouterr()
    assert err == ""
    assert "can0/base         50    +1    0" in out
    assert "driver    servos: dynamixel, devices wrist1, wrist2" in out


def test_unknown_can_interface(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    text = text.replace("model: robots/", f"model: {CONFIG}/robots/")
    text = text.replace("geometry: collision/", f"geometry: {CONFIG}/collision/")
    text = text.replace("interface: socketcan", "interface: carrier-pigeon")
    text = text.replace("port: /dev/ttyUSB0", "port: /dev/null")
    (tmp_path / "example.yaml").write_text(text, encoding="utf-8")
    assert check("--config", str(tmp_path / "example.yaml")) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"{tmp_path / 'example.yaml'}: drivers.can0.params.interface: unknown python-can "
        "interface 'carrier-pigeon'; known: "
    )
    assert "socketcan" in line


def test_a_broken_file_lists_every_problem_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SIM.read_text(encoding="utf-8")
    text = text.replace("model: robots/", f"model: {CONFIG}/robots/")
    text = text.replace("geometry: collision/", f"geometry: {CONFIG}/collision/")
    text = text.replace("gear_ratio: 4.0", "gear_ratio: -3")
    text = text.replace("loop_hz: 250", "loop_hz: 250\nloop_rate: 250")
    text = text.replace("device: wrist3", "device: wrist9")
    config = tmp_path / "broken.yaml"
    config.write_text(text, encoding="utf-8")
    assert check("--config", str(config), "--probe") == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"{config}:11: loop_rate: unknown option; did you mean 'loop_hz'?")
    assert lines[1].startswith(f"{config}:")
    assert lines[1].endswith(": joints.shoulder_lift_joint.gear_ratio: -3 must be > 0")
    assert lines[2].endswith(
        ": joints.wrist_3_joint.device: 'wrist9' is not a device of driver 'sim'; its devices: "
        "base, shoulder, elbow, wrist1, wrist2, wrist3"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: [unclosed\n", ":2:1: invalid YAML: "),
        ("- just\n- a list\n", ": the top level must be a mapping of options, got a list"),
    ],
)
def test_unreadable_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    config = tmp_path / "arm.yaml"
    config.write_text(text, encoding="utf-8")
    assert check("--config", str(config)) == 1
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"{config}{expected}")


def test_a_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--config", str(tmp_path / "none.yaml")) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"{tmp_path / 'none.yaml'}: cannot read: No such file or directory"


def _down_netdev() -> str | None:
    for netdev in sorted(Path("/sys/class/net").glob("*")):
        try:
            if (netdev / "operstate").read_text().strip() == "down":
                return netdev.name
        except OSError:
            continue
    return None


@pytest.mark.skipif(_down_netdev() is None, reason="no network interface is down here")
def test_a_socketcan_interface_that_is_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    channel = _down_netdev()
    text = EXAMPLE.read_text(encoding="utf-8")
    text = text.replace("model: robots/", f"model: {CONFIG}/robots/")
    text = text.replace("geometry: collision/", f"geometry: {CONFIG}/collision/")
    text = text.replace("channel: can0", f"channel: {channel}")
    text = text.replace("port: /dev/ttyUSB0", "port: /dev/null")
    (tmp_path / "example.yaml").write_text(text, encoding="utf-8")
    assert check("--config", str(tmp_path / "example.yaml"), "--probe") == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        f"drivers.can0.params.channel: network interface {channel!r} is down: "
        f"`sudo ip link set {channel} up type can bitrate <bits/s>`"
    )


def test_the_cli_runs_check_without_tracebacks(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"name: arm\nmodel: {CONFIG}/robots/ur5.urdf\njoints: {{}}\nloop_hz: 1\n")
    for config, code in ((SIM, 0), (broken, 1)):
        done = subprocess.run(
            [sys.executable, "-m", "armd", "check", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    joints = sorted(f"joints.{joint}" for joint in UR5_HOME)  # all on line 3: by path
    assert [line.split(": ", 2)[1] for line in lines] == [
        "drivers",  # missing: no line
        "tool_link",  # required (the UR5 branches): no line
        *joints,
        "loop_hz",
    ]
    assert lines[-1] == f"{broken}:4: loop_hz: 1 must be >= 10"
