import assert from "node:assert/strict";
import test from "node:test";

import { MIC_CONSTRAINTS, micConstraints } from "../../../web/audio.js";

test("the browser cancels the echo unless the server does (docs/audio.md, in the server)", () => {
  assert.equal(micConstraints(), MIC_CONSTRAINTS);
  assert.equal(micConstraints({ serverEchoCancellation: false }), MIC_CONSTRAINTS);
  assert.equal(MIC_CONSTRAINTS.audio.echoCancellation, true);
  const server = micConstraints({ serverEchoCancellation: true });
  // The server's canceller gets the raw room: no browser canceller before
  // it, no gain control moving the echo path under it.
  assert.deepEqual(server, {
    audio: {
      channelCount: 1,
      echoCancellation: false,
      noiseSuppression: true,
      autoGainControl: false,
    },
  });
  assert.equal(MIC_CONSTRAINTS.audio.echoCancellation, true, "the default is not changed");
});
