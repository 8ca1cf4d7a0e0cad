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
