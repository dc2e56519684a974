import assert from "node:assert/strict";
import test from "node:test";

import { memoryUrl } from "../../../web/memory.js";

test("memoryUrl is the socket's sibling, over HTTP", () => {
  assert.equal(memoryUrl("ws://127.0.0.1:8000/ws"), "http://127.0.0.1:8000/memory");
  assert.equal(memoryUrl("wss://a.example/ws?token=t"), "https://a.example/memory");
  // Mounted under a prefix, the REST stays under it.
  assert.equal(memoryUrl("wss://a.example/voice/ws"), "https://a.example/voice/memory");
});
