"""The QR codes the service draws (app/web/qr.py: segno), checked with a real decoder: the SVG,
rendered by Chromium at the size the payment button shows it, decodes with zbar to exactly the text
given, for EIP-681 payment URIs of every realistic length and for arbitrary text long enough to need
the larger versions (several error correction blocks, version bits). The button's own use of it (GET
…/qr.svg) is decoded in test_button_live.py and tests/demo/test_demo_live.py."""
import random
import re
import string

import pytest
from support.qr_decode import qr_texts

from app.web import qr

TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
ADDRESS = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
RANDOM = random.Random(681)
ASCII = string.ascii_letters + string.digits + ":/?&=.@-_%"


def eip681(chain_id, base_units):
    return f"ethereum:{TOKEN}@{chain_id}/transfer?address={ADDRESS}&uint256={base_units}"


TEXTS = [
    eip681(31337, 19_990_000),  # 19.99 of a 6-decimal token on a local node
    eip681(1, 1),
    eip681(137, 10**6 * 10**18),  # the largest amount (MAX_AMOUNT) of an 18-decimal token
    eip681(2**53, 123_456_789_012_345_678_901_234_567),
    "a",
    "Zahlung für Bestellung Nº 42 ✓",  # UTF-8 bytes
    *("".join(RANDOM.choice(ASCII) for _ in range(n)) for n in (17, 78, 154, 230, 331, 512, 858)),
]


def render(page, text):
    """`text`'s SVG in a box of the button's size (196 px, white margin), as a PNG."""
    page.set_content('<body style="margin:0;background:#fff">'
                     '<div id="qr" style="width:196px;height:196px;'
                     f'padding:12px">{qr.svg(text)}</div>')
    return page.locator("#qr").screenshot()


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: f"{len(t)}-chars")
def test_qr_code_decodes_to_the_text(page, text):
    assert qr_texts(render(page, text)) == [text]


@pytest.mark.parametrize("length, version", [(14, 1), (15, 2), (152, 8), (153, 9), (213, 10),
                                             (214, 11)])
def test_qr_code_is_the_smallest_version_that_holds_the_text_at_level_m(length, version):
    """At the byte-mode capacities of level M in ISO/IEC 18004's table, with the 4-module quiet
    zone."""
    size = version * 4 + 17 + 8
    assert re.match(f'<svg shape-rendering="crispEdges" xmlns="http://www.w3.org/2000/svg" '
                    f'viewBox="0 0 {size} {size}">', qr.svg("x" * length))

