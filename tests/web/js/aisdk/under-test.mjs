// What the scenario suites run against, chosen by the environment so that
// the same files test every AI SDK major, in our tree and in a scratch app
// that installed the transport's tarball (.ci/transport-package):
//
// * AUDIOCORE_AI_PACKAGE: the `ai` the chats run on ("ai": 6 here, as
//   pinned in tests/web/js/package.json; "ai-v7": 7). Default "ai".
//   AUDIOCORE_AI_MAJOR, if set, is the major it must be.
// * AUDIOCORE_AI_SCHEMAS: the packages whose uiMessageChunkSchema every chunk
//   is checked against, comma-separated. Default: the one under test.
// * AUDIOCORE_SDK=package: the transport from the installed
//   @audiocore/chat-transport, not from web/sdk/ in this tree.

export const AI_PACKAGE = process.env.AUDIOCORE_AI_PACKAGE || "ai";
export const ai = await import(AI_PACKAGE);
const { version } = (await import(`${AI_PACKAGE}/package.json`, { with: { type: "json" } })).default;
export const AI_MAJOR = Number(version.split(".")[0]);
// A wrong alias would run every test on the other major and pass.
if (process.env.AUDIOCORE_AI_MAJOR && Number(process.env.AUDIOCORE_AI_MAJOR) !== AI_MAJOR) {
  throw new Error(`expected ai ${process.env.AUDIOCORE_AI_MAJOR} from ${AI_PACKAGE}, got ${version}`);
}

export const SCHEMA_PACKAGES = (process.env.AUDIOCORE_AI_SCHEMAS || AI_PACKAGE).split(",");
/** uiMessageChunkSchema() of each of SCHEMA_PACKAGES, in that order. */
export const SCHEMAS = await Promise.all(
  SCHEMA_PACKAGES.map(async (name) => (await import(name)).uiMessageChunkSchema()),
);

export const sdk =
  process.env.AUDIOCORE_SDK === "package"
    ? await import("@audiocore/chat-transport")
    : await import("../../../../web/sdk/chat-transport.js");
