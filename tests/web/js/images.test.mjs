// The conversation's images (web/conversation.js): what the user sent shows
// in the user's entry, a `file` chunk in the agent's entry of its turn.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Conversation } from "../../../web/conversation.js";

const IMAGE = { type: "file", mediaType: "image/png", url: "data:image/png;base64,iVBORw0KGgo=" };

test("a typed turn keeps the images sent with it", () => {
  const changes = [];
  const conversation = new Conversation((entry, placement) => changes.push([entry.id, placement.isNew]));
  const entry = conversation.userTyped("what is this", [{ ...IMAGE, data: "iVBORw0KGgo=" }]);
  assert.deepEqual(entry.images, [{ url: IMAGE.url, mediaType: "image/png" }]);
  assert.deepEqual(changes, [[entry.id, true], [entry.id, false]]);
  assert.deepEqual(conversation.userTyped("plain").images, []);
});

test("a file chunk goes into the agent's entry of the turn, after its words or before", () => {
  const conversation = new Conversation();
  conversation.apply({ type: "start", messageId: "m1" });
  conversation.apply({ type: "text-start", id: "t1" });
  conversation.apply({ type: "text-delta", id: "t1", delta: "Here is a red square." });
  conversation.apply(IMAGE);
  conversation.apply({ type: "finish" });
  const [agent] = conversation.entries;
  assert.equal(agent.text, "Here is a red square.");
  assert.deepEqual(agent.images, [{ url: IMAGE.url, mediaType: "image/png" }]);
  assert.equal(agent.final, true);

  // An image before any words opens the agent's entry; the words join it.
  conversation.apply({ type: "start", messageId: "m2" });
  conversation.apply(IMAGE);
  conversation.apply({ type: "text-delta", id: "t2", delta: "Drawn." });
  const second = conversation.entries.at(-1);
  assert.equal(conversation.entries.length, 2);
  assert.deepEqual([second.text, second.images.length], ["Drawn.", 1]);
});

test("a file chunk of another type (the seed's Recorded Audio) is no image", () => {
  const conversation = new Conversation();
  conversation.apply({ type: "start", messageId: "m1" });
  conversation.apply({ type: "file", mediaType: "audio/wav", url: "data:audio/wav;base64,UklGRg==" });
  assert.deepEqual(conversation.entries, []);
});
