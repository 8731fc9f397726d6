"""WebDataset `.tar` shards of audio, as the study's own stack keeps its pretraining audio (Dasheng's
README, "Data preparation", and `dasheng/prepare/wavlist_to_tar.py`): each sample is a group of members
sharing a key, `KEY.flac` (or any audio extension) and optionally `KEY.json` with the sample's other
columns (`label`, `split`, ...).

A shard is indexed by reading its member headers only (tarfile seeks from header to header; in a bucket
each header is one small ranged read of `HEADER_BLOCK_BYTES`), and each audio member becomes an input of
its own, opened later at its offset (`pipeline.audio.input_bytes`): prep accounts for, subsets and
featurizes a member exactly as it does a file. The key follows WebDataset's rule: the member's folder
plus its name up to the first dot.
"""

from __future__ import annotations

import json
import posixpath
import tarfile

from pipeline.audio.input_bytes import HEADER_BLOCK_BYTES, InputLocation, open_input_bytes
from pipeline.audio.input_file import DUPLICATE_KIND, InputFile, InputListing, is_audio_name

TAR_EXTENSION = ".tar"
COMPRESSED_TAR_EXTENSIONS = (".tar.gz", ".tgz")
METADATA_FIELDS = ("label", "split")
DAMAGED_TAR_KIND = "damaged tar"
COMPRESSED_TAR_KIND = "compressed tar"


def is_tar_shard(name: str) -> bool:
    lowered = name.lower()
    return lowered.endswith(TAR_EXTENSION) or lowered.endswith(COMPRESSED_TAR_EXTENSIONS)


def sample_key(member_name: str) -> tuple[str, str]:
    """(key, extension) of a member as WebDataset splits it: `a/b.seg.flac` -> (`a/b`, `seg.flac`)."""
    folder, base = posixpath.split(member_name)
    stem, _, extension = base.partition(".")
    return posixpath.join(folder, stem) if folder else stem, extension


class TarIndex:
    """The members of one shard: audio members with their key's metadata, the rest counted."""

    def __init__(self) -> None:
        self.audio: list[tarfile.TarInfo] = []
        self.metadata: dict[str, dict] = {}  # key -> the fields of its KEY.json
        self.skipped_non_audio = 0
        self.problem: str | None = None  # why the index stops early (a damaged shard), after `audio`

    def fields_of(self, member: tarfile.TarInfo) -> dict[str, str | None]:
        """`label` and `split` of a member's sample, as text (a list of labels joined by ';')."""
        found = self.metadata.get(sample_key(member.name)[0], {})
        return {name: _as_text(found.get(name)) for name in METADATA_FIELDS}


def _as_text(value) -> str | None:
    if value in (None, ""):
        return None
    if isinstance(value, list):
        return ";".join(str(item) for item in value)
    return str(value)


def tar_shard_inputs(path: str, source: str) -> InputListing:
    """Every audio member of the shard at `path` (named `source`) as an input `SOURCE/MEMBER`; a shard
    that cannot be read, is compressed or is damaged is also an input, rejected with the reason."""
    if path.lower().split("?")[0].endswith(COMPRESSED_TAR_EXTENSIONS):
        reason = ("a compressed tar cannot be read member by member; repack it as a plain .tar (FLAC inside is "
                  "already compressed: Dasheng's wavlist_to_tar without --compress)")  # fmt: skip
        return InputListing(
            inputs=[InputFile(path=path, source=source, problem=reason, problem_kind=COMPRESSED_TAR_KIND)]
        )
    try:
        index = index_tar_shard(path)
    except OSError as error:
        reason = f"the tar shard cannot be read ({' '.join(str(error).split())[:200]})"
        return InputListing(inputs=[InputFile(path=path, source=source, problem=reason, problem_kind="unreadable")])
    listing, seen = InputListing(inputs=[], skipped_non_audio=index.skipped_non_audio), set()
    for member in index.audio:
        name = f"{source}/{member.name}"
        if name in seen:  # a tar may hold one name twice; the first is the input
            listing.inputs.append(InputFile(path=path, source=name, problem="duplicate member name in the tar shard",
                                            problem_kind=DUPLICATE_KIND))  # fmt: skip
            continue
        seen.add(name)
        listing.inputs.append(
            InputFile(
                path=path,
                source=name,
                size_bytes=member.size,
                mtime_ns=int(member.mtime * 1e9),
                member_offset=member.offset_data,
                **index.fields_of(member),
            )  # fmt: skip
        )
    if index.problem:
        listing.inputs.append(InputFile(path=path, source=source, problem=index.problem, problem_kind=DAMAGED_TAR_KIND))
    return listing


def index_tar_shard(path: str) -> TarIndex:
    """Read the member headers of the plain tar at `path` (a local path or a URI). Metadata members are
    read whole (they are small); a shard that ends mid-member is indexed up to the damage and says so."""
    index = TarIndex()
    with open_input_bytes(InputLocation(path=path), block_bytes=HEADER_BLOCK_BYTES) as stream:
        try:
            with tarfile.open(fileobj=stream, mode="r:") as shard:
                for member in shard:
                    _add_member(index, shard, member)
        except (tarfile.TarError, EOFError) as error:
            where = f"after member {index.audio[-1].name!r}" if index.audio else "at its start"
            index.problem = f"the tar shard is damaged {where} ({error}); the members before it are kept"
    return index


def _add_member(index: TarIndex, shard: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    if not member.isfile():
        return
    _, extension = sample_key(member.name)
    if is_audio_name(member.name):
        index.audio.append(member)
    elif extension.lower() == "json":
        try:
            fields = json.loads(shard.extractfile(member).read().decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            fields = {}  # unreadable metadata: the sample keeps no label rather than failing the shard
        index.metadata[sample_key(member.name)[0]] = fields if isinstance(fields, dict) else {}
    else:
        index.skipped_non_audio += 1
