// The page's image input: a file attached to the next typed turn, and the
// camera shared as frames. The controls' state lives here; what is sent and
// where (the socket) is the caller's.

import { Camera, readImage } from "./images.js";

export class ImageInput {
  /**
   * @param {object} ui `attach` (file input), `attachButton`, `attached` (its
   *   preview), `camera` (toggle button), `cameraPreview` (video)
   * @param {object} io `sendFrame(frame) -> bool` (a camera frame; false:
   *   not sent) and `showError(text)`
   */
  constructor(ui, { sendFrame, showError }) {
    this.ui = ui;
    this.showError = showError;
    this.attachment = null; // {mediaType, data, url}: sent with the next typed turn
    this.camera = new Camera(ui.cameraPreview, (frame) => {
      const sent = sendFrame(frame);
      if (sent) ui.camera.dataset.frames = String(this.camera.frames + 1);
      return sent;
    });
    ui.attachButton.addEventListener("click", () => ui.attach.click());
    ui.attach.addEventListener("change", () => this.#onAttach());
    ui.camera.addEventListener("click", () => this.toggleCamera());
  }

  /** The attached image, now given away (the preview cleared), or null. */
  take() {
    const image = this.attachment;
    this.#attach(null);
    return image;
  }

  #attach(image) {
    const { ui } = this;
    this.attachment = image;
    ui.attached.hidden = !image;
    if (image) ui.attached.src = image.url;
    else ui.attached.removeAttribute("src");
    ui.attach.value = "";
  }

  async #onAttach() {
    const file = this.ui.attach.files?.[0];
    if (!file) return;
    try {
      this.#attach(await readImage(file));
    } catch (error) {
      this.#attach(null);
      this.showError(error.message);
    }
  }

  async toggleCamera() {
    if (this.camera.on) {
      this.stopCamera();
      return;
    }
    this.ui.camera.setAttribute("aria-pressed", "true");
    this.ui.cameraPreview.hidden = false;
    try {
      await this.camera.start();
    } catch (error) {
      this.stopCamera();
      this.showError(`The camera could not start: ${error.message}`);
    }
  }

  stopCamera() {
    this.camera.stop();
    this.ui.camera.setAttribute("aria-pressed", "false");
    this.ui.cameraPreview.hidden = true;
  }
}
