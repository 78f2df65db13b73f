"""The annotation a page sends (docs/design.md §4): targets with instructions, source locations and the
picked elements' bounded facts (allowlisted attributes only)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from spotpatch_agent.protocol.base import InModel
from spotpatch_agent.protocol.limits import LIMITS

__all__ = [
    "MAX_IMAGE_BYTES", "MAX_JOB_IMAGE_BYTES", "AreaElement", "AreaInfo", "ElementInfo", "Rect", "SourceLocation",
    "SpotAnnotation", "Target", "TargetImage", "UsageSite",
]

#: Largest picture of one target, in decoded bytes (issue 26: "images to vision models").
MAX_IMAGE_BYTES = 256 * 1024
#: Largest sum of the targets' pictures in one annotation, in decoded bytes: base64 makes it about 683 KiB on the
#: wire, which leaves room for the rest of the request under the dev server's 1 MiB body limit
#: (node-shim/src/server/http.ts).
MAX_JOB_IMAGE_BYTES = 512 * 1024
_MAGIC = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/webp": (b"RIFF",)}

_ALLOWED_ATTR = re.compile(r"^(id|class|role|aria-[a-z0-9-]+|data-testid|name|type|href|alt|title)$")


class SourceLocation(InModel):
    file: str = Field(min_length=1, max_length=1024)
    line: int = Field(ge=1)
    column: int = Field(default=1, ge=1)
    component: str | None = Field(default=None, max_length=200)


class Rect(InModel):
    x: float
    y: float
    width: float
    height: float


class ElementInfo(InModel):
    tag_name: str = Field(min_length=1, max_length=64)
    selector: str | None = Field(default=None, max_length=1000)
    text: str = Field(default="", max_length=500)
    attributes: dict[str, str] = Field(default_factory=dict)
    rect: Rect | None = None

    @field_validator("attributes")
    @classmethod
    def _allowed_attributes(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _ALLOWED_ATTR.match(key):
                raise ValueError("only the attributes id, class, role, aria-*, data-testid, name, type, href, alt, "
                                 "title are allowed")
            if len(value) > 500:
                raise ValueError("an attribute value is longer than 500 characters")
        return v


class UsageSite(InModel):
    """Where an enclosing component instance is used: ``component`` is the used component's name (when
    known), ``file:line:column`` the start of its usage tag (project-relative, never ``node_modules``)."""

    component: str | None = Field(default=None, max_length=200)
    file: str = Field(min_length=1, max_length=1024)
    line: int = Field(ge=1)
    column: int = Field(default=1, ge=1)


class TargetImage(InModel):
    """The picked element's rendering as the page captured it: PNG or WebP, standard base64 (no ``data:``
    prefix), at most :data:`MAX_IMAGE_BYTES` decoded. Only a model profile with proven vision receives it
    (engine/loop.py); the audit ledger records its SHA-256 and size only, never the bytes."""

    media_type: Literal["image/png", "image/webp"]
    #: Base64 of the image; the character bound is a memory guard, the decoded-size bound is checked on the Target.
    data: str = Field(min_length=1, max_length=4 * 1024 * 1024)

    @property
    def raw(self) -> bytes:
        """The decoded bytes (validated when the model was built)."""
        return base64.b64decode(self.data)

    @property
    def byte_size(self) -> int:
        """Decoded size in bytes, without decoding."""
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    @model_validator(mode="after")
    def _decodes(self) -> TargetImage:
        try:
            raw = base64.b64decode(self.data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("image.data must be standard base64 (no data: prefix)") from None
        if not raw.startswith(_MAGIC[self.media_type]) or (self.media_type == "image/webp" and raw[8:12] != b"WEBP"):
            raise ValueError(f"image.data is not a {self.media_type.removeprefix('image/').upper()} image")
        return self
# ---- Area targets (issue 26): the dragged rectangle and the located elements inside it ------------------

#: Located elements an area target carries at most (the page sends the largest).
MAX_AREA_ELEMENTS = 8


class AreaElement(InModel):
    """A located element (``data-spotpatch-loc``) overlapping an area target's rectangle: its source location,
    tag name and border box (page coordinates, CSS px)."""

    source: SourceLocation
    tag_name: str = Field(min_length=1, max_length=64)
    rect: Rect


class AreaInfo(InModel):
    """An area target's rectangle as the user dragged it: ``rect`` in page coordinates (CSS px of the top
    document, scroll included), the viewport's size then, and the located elements overlapping it, largest
    overlap first (at most :data:`MAX_AREA_ELEMENTS`)."""

    rect: Rect
    viewport_width: float = Field(ge=0, le=100_000)
    viewport_height: float = Field(ge=0, le=100_000)
    elements: list[AreaElement] = Field(default_factory=list, max_length=MAX_AREA_ELEMENTS)


class Target(InModel):
    index: int = Field(ge=1)
    instruction: str = Field(min_length=1, max_length=LIMITS["maxInstructionChars"][1])
    source: SourceLocation | None = None
    #: The component usage chain of the picked element, innermost first: the usage site of the component
    #: that renders the element, then of the component using that one, … up to the page (at most 5).
    usage_chain: list[UsageSite] = Field(default_factory=list, max_length=5)
    #: The picked element; absent for a target given as a source location only (``spotpatch-agent run``).
    element: ElementInfo | None = None
    #: The picked element's picture (PNG or WebP, base64), sent to the model only when its profile's vision is
    #: proven by the probe; at most :data:`MAX_IMAGE_BYTES` decoded, :data:`MAX_JOB_IMAGE_BYTES` per annotation.
    image: TargetImage | None = None
    #: An area target (a dragged rectangle holding no whole located element): the rectangle and the located
    #: elements overlapping it. Absent for an element or text target.
    area: AreaInfo | None = None

    @model_validator(mode="after")
    def _image_bound(self) -> Target:
        if self.image is not None and self.image.byte_size > MAX_IMAGE_BYTES:
            raise ValueError(f"target {self.index}: its image is {self.image.byte_size} bytes; at most "
                             f"{MAX_IMAGE_BYTES} bytes ({MAX_IMAGE_BYTES // 1024} KiB) per target are accepted")
        return self


class SpotAnnotation(InModel):
    annotation_id: str = Field(min_length=1, max_length=128)
    page_url: str = Field(default="/", max_length=2000)
    targets: list[Target] = Field(min_length=1, max_length=LIMITS["maxTargets"][1])

    @field_validator("page_url")
    @classmethod
    def _path_only(cls, v: str) -> str:
        if not v.startswith("/") or v.startswith("//"):
            raise ValueError("pageUrl must be a path and query only (start with a single '/')")
        return v

    @model_validator(mode="after")
    def _indexes(self) -> SpotAnnotation:
        if [t.index for t in self.targets] != list(range(1, len(self.targets) + 1)):
            raise ValueError("target indexes must be 1, 2, 3, … in order")
        total = sum(t.image.byte_size for t in self.targets if t.image is not None)
        if total > MAX_JOB_IMAGE_BYTES:
            sizes = ", ".join(f"target {t.index}: {t.image.byte_size}" for t in self.targets if t.image is not None)
            raise ValueError(f"the targets' images total {total} bytes ({sizes}); at most {MAX_JOB_IMAGE_BYTES} "
                             f"bytes ({MAX_JOB_IMAGE_BYTES // 1024} KiB) per job are accepted")
        return self
