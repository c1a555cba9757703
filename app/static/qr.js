/*
 * QR code encoder of the payment button: qrSvg(text) draws `text` as an SVG QR code.
 *
 * Standard: ISO/IEC 18004 (QR Code). Supported: byte mode only (the text as UTF-8), error
 * correction level M, versions 1-40 (the smallest that holds the text), the mask with the lowest
 * penalty score, a 4-module quiet zone. Not supported: numeric, alphanumeric and kanji modes,
 * other levels, Micro QR, structured append.
 *
 * Hand-written because showing a payment address must send nothing to a third party (no QR image
 * service, nothing the merchant's Content-Security-Policy must allow) and the button has no
 * dependency and no build step. tests/button/test_button_qr.py decodes its output with zbar.
 *
 * This file is declarations only: the route (app/routes/button.py) serves it and button.js inside
 * one function scope, so none of these names reaches the page's globals.
 */

// Per version (index 0 unused), level M: error correction codewords per block, number of blocks.
const QR_ECC_PER_BLOCK = [-1, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26,
  26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28];
const QR_BLOCKS = [-1, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20,
  21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49];

const QR_MASKS = [
  (x, y) => (x + y) % 2 === 0, (x, y) => y % 2 === 0, (x) => x % 3 === 0, (x, y) => (x + y) % 3 === 0,
  (x, y) => (Math.floor(x / 3) + Math.floor(y / 2)) % 2 === 0, (x, y) => ((x * y) % 2) + ((x * y) % 3) === 0,
  (x, y) => (((x * y) % 2) + ((x * y) % 3)) % 2 === 0, (x, y) => (((x + y) % 2) + ((x * y) % 3)) % 2 === 0,
];

/** An SVG document of `text`'s QR code, with the 4-module quiet zone. */
function qrSvg(text) {
  const modules = qrMatrix(text);
  const size = modules.length + 8;
  let path = '';
  modules.forEach((row, y) => row.forEach((dark, x) => { if (dark) path += `M${x + 4} ${y + 4}h1v1h-1z`; }));
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${size} ${size}" shape-rendering="crispEdges">`
    + `<rect width="${size}" height="${size}" fill="#fff"/><path d="${path}" fill="#000"/></svg>`;
}

/** The QR code of `text` as rows of booleans (true: dark). */
function qrMatrix(text) {
  const bytes = Array.from(new TextEncoder().encode(text));
  const ver = qrVersion(bytes.length);
  const grid = qrFunctionPatterns(ver);
  qrPlaceCodewords(grid, qrCodewords(qrDataBytes(bytes, ver), ver));
  qrApplyBestMask(grid);
  return grid.modules;
}

// ---- the data: codewords with error correction ---------------------------------------------

function qrVersion(byteCount) {
  for (let ver = 1; ver <= 40; ver++) {
    const bits = 4 + (ver < 10 ? 8 : 16) + byteCount * 8;
    if (bits <= qrDataCodewords(ver) * 8) return ver;
  }
  throw new RangeError('too long for a QR code');
}

function qrRawModules(ver) { // data + ECC modules: all but the function patterns
  let n = (16 * ver + 128) * ver + 64;
  if (ver >= 2) {
    const align = Math.floor(ver / 7) + 2;
    n -= (25 * align - 10) * align - 55;
    if (ver >= 7) n -= 36;
  }
  return n;
}

function qrDataCodewords(ver) {
  return Math.floor(qrRawModules(ver) / 8) - QR_ECC_PER_BLOCK[ver] * QR_BLOCKS[ver];
}

/** Mode, length, the bytes, terminator and padding: the data codewords of version `ver`. */
function qrDataBytes(bytes, ver) {
  const capacity = qrDataCodewords(ver) * 8;
  const bits = [];
  const put = (value, len) => { for (let i = len - 1; i >= 0; i--) bits.push((value >>> i) & 1); };
  put(0x4, 4); // byte mode
  put(bytes.length, ver < 10 ? 8 : 16);
  for (const b of bytes) put(b, 8);
  put(0, Math.min(4, capacity - bits.length)); // terminator
  put(0, (8 - (bits.length % 8)) % 8);
  for (let pad = 0xec; bits.length < capacity; pad ^= 0xec ^ 0x11) put(pad, 8);
  const data = [];
  for (let i = 0; i < bits.length; i += 8) data.push(bits.slice(i, i + 8).reduce((a, b) => (a << 1) | b, 0));
  return data;
}

/** The data split into blocks, each with its error correction, interleaved. */
function qrCodewords(data, ver) {
  const numBlocks = QR_BLOCKS[ver];
  const eccLen = QR_ECC_PER_BLOCK[ver];
  const raw = Math.floor(qrRawModules(ver) / 8);
  const numShort = numBlocks - (raw % numBlocks);
  const shortLen = Math.floor(raw / numBlocks);
  const divisor = rsDivisor(eccLen);
  const blocks = [];
  for (let i = 0, k = 0; i < numBlocks; i++) {
    const dat = data.slice(k, k + shortLen - eccLen + (i < numShort ? 0 : 1));
    k += dat.length;
    const ecc = rsRemainder(dat, divisor);
    if (i < numShort) dat.push(0); // placeholder, skipped below
    blocks.push(dat.concat(ecc));
  }
  const codewords = [];
  for (let i = 0; i < blocks[0].length; i++) {
    blocks.forEach((block, j) => {
      if (i !== shortLen - eccLen || j >= numShort) codewords.push(block[i]);
    });
  }
  return codewords;
}

function gfMul(x, y) { // GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1
  let z = 0;
  for (let i = 7; i >= 0; i--) {
    z = (z << 1) ^ ((z >>> 7) * 0x11d);
    z ^= ((y >>> i) & 1) * x;
  }
  return z;
}

/** The Reed-Solomon generator polynomial of `degree` (coefficients, highest first, leading 1 dropped). */
function rsDivisor(degree) {
  const result = new Array(degree).fill(0);
  result[degree - 1] = 1;
  let root = 1;
  for (let i = 0; i < degree; i++) {
    for (let j = 0; j < degree; j++) {
      result[j] = gfMul(result[j], root);
      if (j + 1 < degree) result[j] ^= result[j + 1];
    }
    root = gfMul(root, 0x02);
  }
  return result;
}

function rsRemainder(data, divisor) {
  const result = divisor.map(() => 0);
  for (const b of data) {
    const factor = b ^ result.shift();
    result.push(0);
    divisor.forEach((coef, i) => { result[i] ^= gfMul(coef, factor); });
  }
  return result;
}

// ---- the symbol: function patterns, data placement, mask -----------------------------------

/** A grid of version `ver` with its timing, finder, alignment, format and version patterns. */
function qrFunctionPatterns(ver) {
  const size = ver * 4 + 17;
  const grid = {
    size,
    modules: Array.from({ length: size }, () => new Array(size).fill(false)),
    isFunction: Array.from({ length: size }, () => new Array(size).fill(false)),
  };
  const fn = (x, y, dark) => qrSetFunction(grid, x, y, dark);
  for (let i = 0; i < size; i++) { fn(6, i, i % 2 === 0); fn(i, 6, i % 2 === 0); } // timing
  for (const [cx, cy] of [[3, 3], [size - 4, 3], [3, size - 4]]) { // finders with separators
    for (let dy = -4; dy <= 4; dy++) {
      for (let dx = -4; dx <= 4; dx++) {
        const x = cx + dx;
        const y = cy + dy;
        const d = Math.max(Math.abs(dx), Math.abs(dy));
        if (x >= 0 && x < size && y >= 0 && y < size) fn(x, y, d !== 2 && d !== 4);
      }
    }
  }
  const align = qrAlignment(ver);
  const last = align.length - 1;
  align.forEach((ax, i) => align.forEach((ay, j) => {
    if ((i === 0 && j === 0) || (i === 0 && j === last) || (i === last && j === 0)) return; // finders
    for (let dy = -2; dy <= 2; dy++) {
      for (let dx = -2; dx <= 2; dx++) fn(ax + dx, ay + dy, Math.max(Math.abs(dx), Math.abs(dy)) !== 1);
    }
  }));
  qrDrawFormat(grid, 0); // reserves the format areas before the data is placed
  if (ver >= 7) qrDrawVersion(grid, ver);
  return grid;
}

function qrSetFunction(grid, x, y, dark) {
  grid.modules[y][x] = dark;
  grid.isFunction[y][x] = true;
}

function qrAlignment(ver) { // the alignment patterns' centre coordinates
  if (ver === 1) return [];
  const size = ver * 4 + 17;
  const count = Math.floor(ver / 7) + 2;
  const step = ver === 32 ? 26 : Math.ceil((ver * 4 + 4) / (count * 2 - 2)) * 2;
  const result = [6];
  for (let pos = size - 7; result.length < count; pos -= step) result.splice(1, 0, pos);
  return result;
}

/** Level M and `mask`, with their BCH error correction, in both copies; and the dark module. */
function qrDrawFormat(grid, mask) {
  const { size } = grid;
  const fn = (x, y, dark) => qrSetFunction(grid, x, y, dark);
  const fdata = (0 << 3) | mask; // level M's format bits are 00
  let rem = fdata;
  for (let i = 0; i < 10; i++) rem = (rem << 1) ^ ((rem >>> 9) * 0x537);
  const fbits = ((fdata << 10) | rem) ^ 0x5412;
  const bit = (i) => ((fbits >>> i) & 1) === 1;
  for (let i = 0; i <= 5; i++) fn(8, i, bit(i));
  fn(8, 7, bit(6)); fn(8, 8, bit(7)); fn(7, 8, bit(8));
  for (let i = 9; i < 15; i++) fn(14 - i, 8, bit(i));
  for (let i = 0; i < 8; i++) fn(size - 1 - i, 8, bit(i));
  for (let i = 8; i < 15; i++) fn(8, size - 15 + i, bit(i));
  fn(8, size - 8, true); // the dark module
}

/** The version number with its BCH error correction, in both corners (versions 7 and up). */
function qrDrawVersion(grid, ver) {
  let rem = ver;
  for (let i = 0; i < 12; i++) rem = (rem << 1) ^ ((rem >>> 11) * 0x1f25);
  const vbits = (ver << 12) | rem;
  for (let i = 0; i < 18; i++) {
    const dark = ((vbits >>> i) & 1) === 1;
    const a = grid.size - 11 + (i % 3);
    const b = Math.floor(i / 3);
    qrSetFunction(grid, a, b, dark);
    qrSetFunction(grid, b, a, dark);
  }
}

/** The codewords' bits in the zigzag order: two columns at a time from the right, skipping column 6. */
function qrPlaceCodewords({ size, modules, isFunction }, codewords) {
  let i = 0;
  for (let right = size - 1; right >= 1; right -= 2) {
    if (right === 6) right = 5;
    for (let vert = 0; vert < size; vert++) {
      for (let j = 0; j < 2; j++) {
        const x = right - j;
        const upward = ((right + 1) & 2) === 0;
        const y = upward ? size - 1 - vert : vert;
        if (!isFunction[y][x] && i < codewords.length * 8) {
          modules[y][x] = ((codewords[i >>> 3] >>> (7 - (i & 7))) & 1) === 1;
          i++;
        }
      }
    }
  }
}

/** Tries the eight masks (applying one twice undoes it) and keeps the lowest penalty score's. */
function qrApplyBestMask(grid) {
  const { size, modules, isFunction } = grid;
  const applyMask = (m) => {
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) if (!isFunction[y][x] && QR_MASKS[m](x, y)) modules[y][x] = !modules[y][x];
    }
  };
  let best = 0;
  let bestPenalty = Infinity;
  for (let m = 0; m < 8; m++) {
    applyMask(m);
    qrDrawFormat(grid, m);
    const p = qrPenalty(modules);
    if (p < bestPenalty) { best = m; bestPenalty = p; }
    applyMask(m);
  }
  applyMask(best);
  qrDrawFormat(grid, best);
}

/** ISO/IEC 18004's penalty: long runs, 2x2 blocks, finder-like patterns, dark/light balance. */
function qrPenalty(modules) {
  const size = modules.length;
  let penalty = 0;
  let dark = 0;
  const finderLike = [true, false, true, true, true, false, true];
  const lines = [];
  for (let i = 0; i < size; i++) {
    lines.push(modules[i]);
    lines.push(modules.map((row) => row[i]));
  }
  for (const line of lines) {
    let run = 1;
    for (let k = 1; k <= size; k++) {
      if (k < size && line[k] === line[k - 1]) { run++; continue; }
      if (run >= 5) penalty += run - 2;
      run = 1;
    }
    // 1:1:3:1:1 finder-like patterns with four light modules (or the edge) on one side.
    for (let k = 0; k + 7 <= size; k++) {
      if (!finderLike.every((v, j) => line[k + j] === v)) continue;
      const lightBefore = [1, 2, 3, 4].every((j) => k - j < 0 || !line[k - j]);
      const lightAfter = [0, 1, 2, 3].every((j) => k + 7 + j >= size || !line[k + 7 + j]);
      if (lightBefore || lightAfter) penalty += 40;
    }
  }
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      if (modules[y][x]) dark++;
      if (x + 1 < size && y + 1 < size) {
        const c = modules[y][x];
        if (c === modules[y][x + 1] && c === modules[y + 1][x] && c === modules[y + 1][x + 1]) penalty += 3;
      }
    }
  }
  const total = size * size;
  penalty += (Math.ceil(Math.abs(dark * 20 - total * 10) / total) - 1) * 10;
  return penalty;
}
