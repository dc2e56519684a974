// A PNG made here, byte by byte (node:zlib, no image library): what a test
// sends as an image, its pixels known so the mean colour the model reports
// can be computed from them.

import { crc32, deflateSync } from "node:zlib";

function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "ascii");
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** An 8-bit RGB PNG of `width` x `height`; `pixel(x, y)` gives [r, g, b]. */
export function png(width, height, pixel) {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits, RGB, deflate, no filter, no interlace
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    rows[y * (1 + width * 3)] = 0; // filter: none
    for (let x = 0; x < width; x++) rows.set(pixel(x, y), y * (1 + width * 3) + 1 + x * 3);
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([
    signature,
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(rows)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/** What the offline model says of an image: dimensions and mean colour. */
export function described(width, height, pixel, mediaType = "image/png") {
  const sum = [0, 0, 0];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) pixel(x, y).forEach((v, i) => (sum[i] += v));
  }
  // Pixels chosen so no mean falls on a half (Python's rounding differs there).
  const hex = sum.map((s) => Math.round(s / (width * height)).toString(16).padStart(2, "0")).join("");
  return `a ${width}x${height} ${mediaType}, mean colour #${hex}`;
}

/** Two halves: the left (200, 30, 40), the right (10, 120, 250); mean (105, 75, 145). */
export const halves = (x) => (x < 2 ? [200, 30, 40] : [10, 120, 250]);

export const dataUrl = (bytes, mediaType = "image/png") => `data:${mediaType};base64,${bytes.toString("base64")}`;
