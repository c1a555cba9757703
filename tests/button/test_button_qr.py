"""The payment button's QR code encoder (button.js, served by the service), checked with a real
decoder: the SVG it draws, rendered by Chromium at the size the button shows it, decodes with zbar
to exactly the text given, for EIP-681 payment URIs of every realistic length and for arbitrary
text long enough to need the larger versions (several error correction blocks, version bits)."""
import random
import string

import pytest

from support.qr_decode import qr_texts

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
    *("".join(RANDOM.choice(ASCII) for _ in range(n)) for n in (17, 78, 154, 230, 331, 512, 858)),
]


@pytest.fixture
def qr_page(page, live_server):
    page.set_content(f'<body style="margin:0;background:#fff"><div id="qr" style="width:196px;height:196px;'
                     f'padding:12px"></div><script src="{live_server.url}/payment-button/button.js"></script>')
    page.wait_for_function("customElements.get('payment-button') !== undefined")
    return page


def render(page, text):
    page.evaluate("t => { document.getElementById('qr').innerHTML = customElements.get('payment-button').qrSvg(t); }",
                  text)
    return page.locator("#qr").screenshot()


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: f"{len(t)}-chars")
def test_qr_code_decodes_to_the_text(qr_page, text):
    assert qr_texts(render(qr_page, text)) == [text]


@pytest.mark.parametrize("length, version", [(14, 1), (15, 2), (152, 8), (153, 9), (213, 10), (214, 11)])
def test_qr_code_is_the_smallest_version_that_holds_the_text(qr_page, length, version):
    """At the byte-mode capacities of level M in ISO/IEC 18004's table, with the 4-module quiet zone."""
    svg = qr_page.evaluate("t => customElements.get('payment-button').qrSvg(t)", "x" * length)
    assert f'viewBox="0 0 {version * 4 + 17 + 8} {version * 4 + 17 + 8}"' in svg


def test_the_encoder_leaves_the_pages_globals_alone(qr_page):
    """qr.js is served inside button.js's function scope: none of its names becomes a global."""
    names = ["qrSvg", "qrMatrix", "qrPenalty", "QR_BLOCKS", "QR_MASKS", "gfMul", "PaymentButton"]
    # An indirect eval runs in the global scope: it sees global functions and top-level consts alike.
    defined = "names => names.filter((n) => { try { (0, eval)(n); return true; } catch (e) { return false; } })"
    assert qr_page.evaluate(defined, names) == []
