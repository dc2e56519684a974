// The tools the server asks the browser to run (`tool-input-available` with
// `clientExecutes`). Each returns what goes back as the `tool_result`:
// {output} or {errorText}; none throws.

const GEOLOCATION_ERRORS = {
  1: "the user or the browser denied access to the location",
  2: "the location is not available",
  3: "the location did not arrive in time",
};

/** navigator.geolocation.getCurrentPosition as a promise of {latitude, longitude, accuracy}. */
export function currentPosition(geolocation = globalThis.navigator?.geolocation) {
  return new Promise((resolve, reject) => {
    if (!geolocation) {
      reject(new Error("this browser has no Geolocation API (it needs https:// or localhost)"));
      return;
    }
    geolocation.getCurrentPosition(
      ({ coords }) =>
        resolve({ latitude: coords.latitude, longitude: coords.longitude, accuracy: coords.accuracy }),
      (error) => reject(new Error(GEOLOCATION_ERRORS[error.code] ?? error.message)),
      // The tool's own deadline stays inside the server's (60 s).
      { timeout: 20_000, maximumAge: 60_000 },
    );
  });
}

/**
 * Run one browser tool.
 * @param {{toolName: string, input: object}} call
 * @param {{music: {play(track: string): void} | null, geolocation?: Geolocation}} page
 */
export async function runBrowserTool({ toolName, input }, { music, geolocation }) {
  try {
    switch (toolName) {
      case "change_bgm": {
        if (!music) return { errorText: "the page has no audio running" };
        const track = String(input?.track ?? "");
        music.play(track);
        return { output: { track, playing: track !== "off" } };
      }
      case "get_location":
        return { output: await currentPosition(geolocation) };
      default:
        return { errorText: `this page cannot run the tool ${toolName}` };
    }
  } catch (error) {
    return { errorText: error.message };
  }
}
