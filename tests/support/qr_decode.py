"""Decode QR codes in screenshots with a real decoder: zbar (Debian's libzbar0) through pyzbar.

Without libzbar0, importing pyzbar raises ImportError: the tests using this fail, they never skip
(`.ci/run` installs libzbar0).
"""
import io

from PIL import Image
from pyzbar.pyzbar import ZBarSymbol, decode


def qr_texts(png: bytes) -> list[str]:
    """The texts of the QR codes zbar finds in a PNG (UTF-8)."""
    image = Image.open(io.BytesIO(png)).convert("L")
    return [symbol.data.decode("utf-8") for symbol in decode(image, symbols=[ZBarSymbol.QRCODE])]
