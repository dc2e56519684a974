import assert from "node:assert/strict";
import test from "node:test";

import { currentPosition, runBrowserTool } from "../../../web/browser-tools.js";

const fakeGeolocation = (outcome) => ({
  getCurrentPosition(ok, fail, options) {
    assert.ok(options.timeout > 0 && options.timeout < 60_000, "inside the server's deadline");
    if (outcome.code) fail(outcome);
    else ok({ coords: outcome });
  },
});

test("get_location answers the position, or the reason there is none", async () => {
  const here = { latitude: 48.8584, longitude: 2.2945, accuracy: 10, altitude: null };
  assert.deepEqual(await runBrowserTool({ toolName: "get_location", input: {} }, { geolocation: fakeGeolocation(here) }), {
    output: { latitude: 48.8584, longitude: 2.2945, accuracy: 10 },
  });
  assert.deepEqual(
    await runBrowserTool({ toolName: "get_location", input: {} }, { geolocation: fakeGeolocation({ code: 1, message: "" }) }),
    { errorText: "the user or the browser denied access to the location" },
  );
  await assert.rejects(currentPosition(undefined), /no Geolocation API/);
});

test("change_bgm plays the track, reports what plays, and refuses an unknown one", async () => {
  const played = [];
  const music = {
    play(track) {
      if (!["jazz", "off"].includes(track)) throw new RangeError(`unknown track "${track}"`);
      played.push(track);
    },
  };
  const run = (track) => runBrowserTool({ toolName: "change_bgm", input: { track } }, { music });
  assert.deepEqual(await run("jazz"), { output: { track: "jazz", playing: true } });
  assert.deepEqual(await run("off"), { output: { track: "off", playing: false } });
  assert.deepEqual(await run("polka"), { errorText: 'unknown track "polka"' });
  assert.deepEqual(played, ["jazz", "off"]);
  assert.deepEqual(await runBrowserTool({ toolName: "change_bgm", input: { track: "jazz" } }, { music: null }), {
    errorText: "the page has no audio running",
  });
  assert.match((await runBrowserTool({ toolName: "launch", input: {} }, { music })).errorText, /cannot run the tool launch/);
});
