"""dev.py: the README's set-up, run as a user runs it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent


class TestFirstInstall:
    def test_a_first_install_shows_its_progress_and_where_retain_is(self, tmp_path):
        """A first run says it is installing, lets pip report each step, and ends by saying where `retain` is."""
        project = tmp_path / "project"
        (project / "src" / "tiny").mkdir(parents=True)
        shutil.copy(ROOT / "dev.py", project / "dev.py")
        (project / "src" / "tiny" / "__init__.py").write_text("def main():\n    print('tiny demo')\n")
        (project / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
            '[project]\nname = "tiny"\nversion = "0"\n[project.optional-dependencies]\ntest = []\n'
            '[project.scripts]\nretain = "tiny:main"\n[tool.setuptools.packages.find]\nwhere = ["src"]\n')
        result = subprocess.run([sys.executable, "dev.py", "demo"], cwd=project, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, result.stderr
        assert "installing" in result.stderr and "a minute or two" in result.stderr
        assert "Successfully installed" in result.stdout + result.stderr  # pip's own report, not silenced
        assert f"`retain` is {project / '.venv' / 'bin' / 'retain'}" in result.stderr
        assert "tiny demo" in result.stdout
        again = subprocess.run([sys.executable, "dev.py", "demo"], cwd=project, capture_output=True, text=True,
                               timeout=120)
        assert again.returncode == 0 and "installing" not in again.stderr  # reused, not reinstalled


class TestInterrupt:
    @pytest.mark.parametrize("command", [["retain", "demo"], ["python3", "dev.py", "demo"]])
    def test_ctrl_c_stops_cleanly_and_leaves_nothing(self, tmp_path, command):
        """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during the demo: one line, exit 130,
        no traceback, and no server directory left in the temp directory."""
        temp = tmp_path / "tmp"
        temp.mkdir()
        argv = [str(Path(sys.executable).parent / "retain"), "demo"] if command[0] == "retain" else \
            [sys.executable, "dev.py", "demo"]
        output = tmp_path / "output"
        with output.open("w") as sink:
            process = subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                       env=dict(os.environ, TMPDIR=str(temp), PYTHONUNBUFFERED="1"))
            try:
                wait_for(lambda: "Act 2" in output.read_text(), "the demo's second act", timeout=120,
                         child=process)
                os.killpg(process.pid, signal.SIGINT)
                assert process.wait(timeout=120) == 130
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        said = output.read_text()
        assert "retain demo interrupted" in said and "Traceback" not in said
        assert sorted(path.name for path in temp.iterdir()) == []


def _without_chromium(tmp_path: Path) -> Path:
    """A folder of links to every program on this machine's PATH but Chromium: the tests see a machine without
    it whether or not this one has it (a first `dev.py test` installs it)."""
    folder = tmp_path / "path-without-chromium"
    folder.mkdir()
    for directory in reversed(os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            if not entry.name.startswith("chromium"):
                link = folder / entry.name
                link.unlink(missing_ok=True)  # the first directory on PATH wins, as in a search
                link.symlink_to(entry.path)
    return folder


class TestChromium:
    """`dev.py test` and the system packages it installs for the dashboard's browser test."""

    @staticmethod
    def _ensure_chromium(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        # PATH holds no chromium and an apt-get that records what it was asked (this machine's is not run).
        bin_dir, asked = tmp_path / "bin", tmp_path / "apt-get-args"
        bin_dir.mkdir()
        (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {asked}\n')
        (bin_dir / "apt-get").chmod(0o755)
        environment = {key: value for key, value in os.environ.items() if key not in ("RETAIN_CHROMIUM", "RETAIN_NO_APT")}
        environment.update(PATH=f"{bin_dir}:{_without_chromium(tmp_path)}", **env)
        done = subprocess.run([sys.executable, "-c", "import dev; dev.ensure_chromium()"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, env=environment)
        return done, asked

    @pytest.mark.skipif(os.geteuid() != 0, reason="dev.py runs apt-get as root only")
    def test_says_what_it_installs_and_why_then_installs_without_recommends(self, tmp_path):
        """Before apt-get runs, one line says it installs chromium, for the browser test, and how to opt out; the
        install takes no recommended packages."""
        done, asked = self._ensure_chromium(tmp_path)
        assert done.returncode == 0, done.stderr
        assert "browser test" in done.stderr and "chromium" in done.stderr and "RETAIN_NO_APT=1" in done.stderr
        assert asked.read_text().split() == ["install", "-y", "-q", "--no-install-recommends", "chromium"]

    def test_retain_no_apt_installs_nothing_and_says_so(self, tmp_path):
        """RETAIN_NO_APT=1: apt-get is never run, and dev.py says the browser test will be skipped."""
        done, asked = self._ensure_chromium(tmp_path, RETAIN_NO_APT="1")
        assert done.returncode == 0, done.stderr
        assert not asked.exists()
        assert "RETAIN_NO_APT is set" in done.stderr and "browser test will be skipped" in done.stderr

    def test_the_browser_test_skips_naming_retain_no_apt(self, tmp_path):
        """With RETAIN_NO_APT set and no Chromium, the dashboard's browser test is skipped with that reason
        (pytest -ra prints it)."""
        environment = {key: value for key, value in os.environ.items() if key != "RETAIN_CHROMIUM"}
        environment.update(RETAIN_NO_APT="1", PATH=f"{Path(sys.executable).parent}:{_without_chromium(tmp_path)}")
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider",
                               "tests/ops/test_dashboard_browser.py"], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env=environment)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SKIPPED" in done.stdout and "RETAIN_NO_APT is set" in done.stdout, done.stdout
