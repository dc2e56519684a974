// Images on the page: an attached file read for the socket, the camera's
// frames sent at a bounded rate, and the <img> an image entry shows. The
// server checks again (docs/protocol.md): these checks only say so sooner.

export const IMAGE_TYPES = ["image/jpeg", "image/png", "image/webp"];
export const MAX_IMAGE_BYTES = 2 * 1024 * 1024; // the server's max_image_bytes
// One frame a second: what Gemini Live takes as video, and under the
// server's image rate (2 a second).
export const CAMERA_FRAME_MS = 1000;
const CAMERA_MAX_WIDTH = 320; // a frame is scaled down to this
const CAMERA_JPEG_QUALITY = 0.7;

/** An attached file as {mediaType, data (base64), url (data URL)}; throws
 * an Error saying why a file will not do. */
export async function readImage(file) {
  if (!IMAGE_TYPES.includes(file.type)) {
    throw new Error(`Only PNG, JPEG or WebP images can be sent (this is ${file.type || "unknown"}).`);
  }
  if (file.size > MAX_IMAGE_BYTES) {
    throw new Error(`The image is ${file.size} bytes; at most ${MAX_IMAGE_BYTES} can be sent.`);
  }
  return imageOf(file.type, new Uint8Array(await file.arrayBuffer()));
}

function imageOf(mediaType, bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  const data = btoa(binary);
  return { mediaType, data, url: `data:${mediaType};base64,${data}` };
}

/** An <img> of an image entry's {url, mediaType}. */
export function imageElement({ url }, alt) {
  const img = document.createElement("img");
  img.className = "entry-image";
  img.src = url;
  img.alt = alt;
  return img;
}

/** The camera: a JPEG frame every CAMERA_FRAME_MS to `send(image)`, and a
 * preview in `video`. `frames` counts what was sent. */
export class Camera {
  constructor(video, send) {
    this.video = video;
    this.send = send;
    this.stream = null;
    this.timer = 0;
    this.frames = 0;
    this.canvas = document.createElement("canvas");
  }

  get on() {
    return this.stream !== null;
  }

  async start() {
    this.stream = await navigator.mediaDevices.getUserMedia({ video: true, audio: false });
    this.video.srcObject = this.stream;
    await this.video.play();
    this.timer = setInterval(() => this.#frame(), CAMERA_FRAME_MS);
    await this.#frame(); // the first at once
  }

  stop() {
    clearInterval(this.timer);
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    this.stream = null;
    this.video.srcObject = null;
  }

  async #frame() {
    const { videoWidth: width, videoHeight: height } = this.video;
    if (!this.on || !width || !height) return;
    const scale = Math.min(1, CAMERA_MAX_WIDTH / width);
    this.canvas.width = Math.round(width * scale);
    this.canvas.height = Math.round(height * scale);
    this.canvas.getContext("2d").drawImage(this.video, 0, 0, this.canvas.width, this.canvas.height);
    const blob = await new Promise((resolve) =>
      this.canvas.toBlob(resolve, "image/jpeg", CAMERA_JPEG_QUALITY),
    );
    if (!blob || !this.on) return;
    const image = imageOf("image/jpeg", new Uint8Array(await blob.arrayBuffer()));
    if (this.send(image)) this.frames++;
  }
}
