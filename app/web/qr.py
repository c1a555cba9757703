"""QR codes drawn by the server as SVG, by segno (ISO/IEC 18004, pure Python, no dependency).

Level M at least (segno raises it while the code keeps its size), the smallest version that holds
the text, the 4-module quiet zone, black on white, and a viewBox without a size: the page sizes
it. `shape-rendering="crispEdges"` keeps module edges sharp at any scale, which is what phone
cameras (and the zbar decoder of the tests) read best. Used by the Button API's
`GET /payment-button/process/<id>/qr.svg` and the console's refund page.
"""
import io
from urllib.parse import quote


def svg(text: str) -> str:
    """A standalone SVG document of `text`'s QR code (no XML declaration: also fits inside HTML)."""
    import segno  # here: only the pages that show a code pay for its import
    out = io.BytesIO()
    segno.make(text, error="m", micro=False).save(
        out, kind="svg", xmldecl=False, omitsize=True, border=4, dark="#000", light="#fff",
        svgclass=None, lineclass=None)
    return out.getvalue().decode("utf-8").replace("<svg ", '<svg shape-rendering="crispEdges" ', 1)


def svg_data_uri(text: str) -> str:
    """The same SVG as a `data:` URL, for an <img src> (the console's pages)."""
    return "data:image/svg+xml;charset=utf-8," + quote(svg(text), safe="")
