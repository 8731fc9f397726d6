"""Fish Fillets NG game data: voice-acted dialogue (Czech, Dutch), music and sound effects."""

from __future__ import annotations

from pathlib import Path

from pipeline.corpus.sources.records import SourceClip

FILLETS_DIR = Path("/usr/share/games/fillets-ng")
DIALOGUE_PACKAGES = {"cs": "fillets-ng-data-cs", "nl": "fillets-ng-data-nl"}
# The two fish are the main voices of each dubbing ("m" small fish, "v" big fish, "velká").
MAIN_VOICE_CODES = ("m", "v")


def dialogue_speaker(path: Path, language: str) -> str:
    """`<level>/<lang>/<prefix>-<voice code>-<line>.ogg` -> "fillets-<lang>-<voice code>"."""
    parts = path.stem.split("-")
    code = parts[1] if len(parts) >= 3 else "unknown"
    return f"fillets-{language}-{code}"


def prepare_fillets_dialogue(
    language: str, fillets_dir: Path = FILLETS_DIR, *, main_voices_only: bool = False
) -> list[SourceClip]:
    """Dialogue lines of one dubbing (`language` "cs" or "nl"); `group` is the voice.

    Voice codes other than the two fish name level characters whose actors the data does not
    identify; `main_voices_only` keeps just the fish, whose identity is certain.
    """
    if language not in DIALOGUE_PACKAGES:
        raise ValueError(f"fillets dialogue language {language!r}: choose one of {sorted(DIALOGUE_PACKAGES)}")
    clips = []
    for path in sorted((fillets_dir / "sound").rglob(f"{language}/*.ogg")):
        speaker = dialogue_speaker(path, language)
        if main_voices_only and speaker.rsplit("-", 1)[1] not in MAIN_VOICE_CODES:
            continue
        clips.append(
            SourceClip(
                path=path,
                source=f"fillets_dialogue_{language}",
                package=DIALOGUE_PACKAGES[language],
                group=speaker,
                info={"language": language},
            )
        )
    return clips


def prepare_fillets_music(fillets_dir: Path = FILLETS_DIR) -> list[SourceClip]:
    """The game's music tracks (about 25 minutes)."""
    return [
        SourceClip(path=path, source="fillets_music", package="fillets-ng-data", group=path.stem)
        for path in sorted((fillets_dir / "music").glob("*.ogg"))
    ]


def prepare_fillets_effects(fillets_dir: Path = FILLETS_DIR) -> list[SourceClip]:
    """Sound effects: the language-neutral `en/` files of each level and the shared `share/*.ogg`."""
    sound_dir = fillets_dir / "sound"
    paths = sorted(sound_dir.rglob("en/*.ogg")) + sorted((sound_dir / "share").glob("*.ogg"))
    return [
        SourceClip(path=path, source="fillets_effects", package="fillets-ng-data", group=path.stem) for path in paths
    ]
