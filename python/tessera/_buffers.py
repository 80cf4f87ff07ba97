"""Buffers as the extension module takes them: bytes, whatever the caller's item type."""


def bytes_view(buffer) -> memoryview:
    """A buffer's bytes, without a copy (its items may be of any type and shape, as long as
    it is C-contiguous)."""
    view = memoryview(buffer)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
