"""Asterisk telephone prompts (real studio speech, 8 kHz) and music on hold."""

from __future__ import annotations

from pathlib import Path

from pipeline.corpus.sources.records import SourceClip

ASTERISK_SOUNDS_DIR = Path("/usr/share/asterisk/sounds")
ASTERISK_MOH_DIR = Path("/usr/share/asterisk/moh")

# directory -> (language, speaker, package). en and es are one voice (Allison Smith).
PROMPT_SPEAKERS: dict[str, tuple[str, str, str]] = {
    "en_US_f_Allison": ("en", "allison", "asterisk-core-sounds-en-wav"),
    "es_MX_f_Allison": ("es", "allison", "asterisk-core-sounds-es-wav"),
    "fr_CA_f_June": ("fr", "june", "asterisk-core-sounds-fr-wav"),
    "it_IT_m_Carlo": ("it", "carlo", "asterisk-core-sounds-it-wav"),
    "ru_RU_f_IvrvoiceRU": ("ru", "ivrvoice-ru", "asterisk-core-sounds-ru-wav"),
    "it_IT_f_Menardi": ("it", "menardi", "asterisk-prompt-it-menardi-wav"),
    "es": ("es", "es-co", "asterisk-prompt-es-co"),  # Colombian Spanish, raw GSM
    "fr": ("fr", "armelle", "asterisk-prompt-fr-armelle"),  # raw GSM
}
PROMPT_SUFFIXES = {".wav", ".gsm"}
SKIPPED_PROMPT_DIRS = {"silence"}  # digital silence, not speech


def prepare_asterisk_prompts(
    sounds_dir: Path = ASTERISK_SOUNDS_DIR, *, speakers: list[str] | None = None
) -> list[SourceClip]:
    """Every prompt file of the installed speakers, sorted; `info` has language and prompt_id.

    `prompt_id` is the path under the speaker directory without suffix (e.g. "digits/7"): the
    same id names the same text in every language, which is how held-out texts are defined.
    """
    clips = []
    for directory, (language, speaker, package) in sorted(PROMPT_SPEAKERS.items()):
        root = sounds_dir / directory
        if (speakers is not None and speaker not in speakers) or not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.suffix not in PROMPT_SUFFIXES or relative.parts[0] in SKIPPED_PROMPT_DIRS:
                continue
            prompt_id = str(relative.with_suffix(""))
            clips.append(
                SourceClip(
                    path=path,
                    source="asterisk_prompts",
                    package=package,
                    group=speaker,
                    info={"language": language, "prompt_id": prompt_id},
                )
            )
    return clips


def prepare_asterisk_music_on_hold(moh_dir: Path = ASTERISK_MOH_DIR) -> list[SourceClip]:
    """The opsound.org music-on-hold tracks (real recorded music, about 18 minutes)."""
    return [
        SourceClip(path=path, source="asterisk_moh", package="asterisk-moh-opsound-wav", group=path.stem)
        for path in sorted(moh_dir.glob("*.wav"))
    ]
