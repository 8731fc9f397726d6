"""The Debian packages the corpus and tasks are built from, their licenses, and installing them.

Licenses summarise each package's `/usr/share/doc/<package>/copyright` (the authoritative text).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pipeline.cli.errors import UserError

PACKAGE_LICENSES: dict[str, str] = {
    "asterisk-core-sounds-en-wav": "CC-BY-SA-3.0 (Allison Smith, Digium)",
    "asterisk-core-sounds-es-wav": "CC-BY-SA-3.0 (Allison Smith, Digium)",
    "asterisk-core-sounds-fr-wav": "CC-BY-SA-3.0 (June Wallack, Digium)",
    "asterisk-core-sounds-it-wav": "CC-BY-SA-3.0 (Digium; some files CC-BY-3.0)",
    "asterisk-core-sounds-ru-wav": "CC-BY-3.0 (IvrVoice)",
    "asterisk-prompt-it-menardi-wav": "CC-BY-SA-3.0 (Menardi)",
    "asterisk-prompt-es-co": "GPL-2",
    "asterisk-prompt-fr-armelle": "BSD-like (permissive redistribution terms)",
    "asterisk-moh-opsound-wav": "CC-BY-SA-3.0 (opsound.org artists)",
    "fillets-ng-data": "GPL-2+",
    "fillets-ng-data-cs": "GPL-2+",
    "fillets-ng-data-nl": "GPL-2+",
    "openttd-opensfx": "CC-BY-SA-3.0 overall; per-sound CC-BY-3.0 / CC0 (named in opensfx.cat)",
    "hydrogen-drumkits": "GPL-2+ / CC-BY-3.0 / CC-BY-SA-3.0 / CC0, per kit (named in each drumkit.xml)",
    "musescore-general-soundfont-small": "MIT (parts public domain or CC0)",
    "timgm6mb-soundfont": "GPL-2",
    "espeak-ng": "GPL-3+ (synthesizer; the rendered speech carries no third-party recording)",
    "fluidsynth": "LGPL-2.1+ (renderer)",
    "sox": "GPL-2+ (converter)",
    "libsox-fmt-all": "GPL-2+ / LGPL-2.1+ (format handlers)",
    "wamerican": "public domain (SCOWL/MWords)",
    "wngerman": "GPL-2+ (parts BSD-4-clause)",
    "wfrench": "GPL-2+",
    "witalian": "GPL-3+",
    "wspanish": "public domain",
    "wdutch": "BSD or CC-BY-3.0, at the user's choice (OpenTaal)",
    "wswedish": "GPL-2+",
    "wportuguese": "GPL-2+ or LGPL-2.1+ or MPL-1.1",
    "wdanish": "GPL-2+",
}


class MissingPackagesError(UserError):
    """Debian packages a build needs are absent and this process cannot install them (the message
    says which, and the command that installs them)."""


def missing_packages(packages: list[str]) -> list[str]:
    """The packages of `packages` that dpkg does not report as installed, in the given order."""
    missing = []
    for package in packages:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
        )
        if "install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def install_command(packages: list[str]) -> str:
    return "sudo apt-get install -y --no-install-recommends " + " ".join(packages)


def ensure_packages(packages: list[str]) -> None:
    """Install what is missing when running as root; otherwise stop with the exact apt command.

    `--no-install-recommends` matters: fillets-ng-data-cs would otherwise pull in the whole game.
    """
    missing = missing_packages(packages)
    if not missing:
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise MissingPackagesError(f"missing Debian packages: {' '.join(missing)}\nrun: {install_command(missing)}")
    print(f"[corpus] installing Debian packages: {' '.join(missing)}", file=sys.stderr)
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=environment, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        check=True,
        env=environment,
        stdout=subprocess.DEVNULL,
    )
    still_missing = missing_packages(missing)
    if still_missing:
        raise MissingPackagesError(f"apt-get did not install: {' '.join(still_missing)}")


def attribution_lines(packages: list[str]) -> list[str]:
    """One Markdown table row per package: name and license."""
    rows = ["| Debian package | license |", "|---|---|"]
    rows += [f"| {package} | {PACKAGE_LICENSES[package]} |" for package in sorted(set(packages))]
    return rows
