// Background music synthesised in the page (no audio files), for the
// change_bgm tool, ducked while the agent speaks.
//
// Graph: voices -> bus (music level) -> duck -> destination, and
// duck -> analyser, so the analyser hears exactly what the listener hears of
// the music (ducking included) and nothing of the agent.
//
// Each track is built so its loudest sustained part sits in its own band
// (TRACK_BANDS), which is how a test — or a curious user — can tell them
// apart on the analyser: lofi's sub bass and kick, ambient's low pad, jazz's
// Rhodes chords voiced above A4.

export const TRACKS = ["jazz", "ambient", "lofi"];
/** Where each track's dominant frequency lies, Hz. */
export const TRACK_BANDS = { lofi: [35, 75], ambient: [120, 300], jazz: [400, 1200] };

const LEVEL = 0.35; // the music under a conversation: well below the agent's voice
const DUCK_GAIN = 0.2; // -14 dB while the agent speaks
const DUCK_ATTACK_S = 0.03; // time constants of setTargetAtTime
const DUCK_RELEASE_S = 0.25;
const LOOKAHEAD_S = 0.6; // notes are scheduled this far ahead on the audio clock...
const TICK_MS = 150; // ...by a main-thread timer this often (timer jitter never reaches the audio)
const FADE_S = 0.3; // a track fades out this fast when stopped or replaced

const midi = (n) => 440 * 2 ** ((n - 69) / 12);

/**
 * The tracks: a tempo, a bar length in beats, and bar(voice, t, beat, index)
 * which schedules one bar starting at audio time t.
 */
const SCORES = {
  jazz: {
    bpm: 132,
    beats: 4,
    // ii-V-I-VI in C, rootless voicings kept above A4 (the dominant band).
    chords: [
      [69, 72, 76, 79], // Dm9: A C E G
      [71, 74, 77, 81], // G13: B D F A
      [71, 74, 76, 79], // Cmaj9: B D E G
      [70, 73, 77, 79], // A7b9: Bb C# F G
    ],
    bass: [
      [38, 41, 45, 48],
      [43, 47, 50, 49],
      [36, 40, 43, 45],
      [45, 44, 43, 40],
    ],
    bar(voice, t, beat, i) {
      const chord = this.chords[i % 4];
      // Rhodes: comping on 1 and the "and" of 2 (swung), sustained.
      // The second hit rings into the next bar, so the chords never stop.
      for (const at of [0, 1.66]) {
        for (const n of chord) {
          voice.tone(midi(n), t + at * beat, 2.6 * beat, { gain: 0.16, attack: 0.01, type: "sine", bell: true });
        }
      }
      this.bass[i % 4].forEach((n, k) => {
        voice.tone(midi(n), t + k * beat, 0.9 * beat, { gain: 0.08, attack: 0.01, type: "triangle" });
      });
      for (let k = 0; k < 4; k++) {
        // Ride cymbal: every beat, and the swung skip note on 2 and 4.
        voice.noise(t + k * beat, 0.12, { gain: 0.05, highpass: 7000 });
        if (k % 2) voice.noise(t + (k + 0.66) * beat, 0.08, { gain: 0.03, highpass: 7000 });
      }
    },
  },
  ambient: {
    bpm: 60,
    beats: 8,
    // A root, then the pad's three voices, all between C3 and C4.
    chords: [
      [48, 52, 55, 60], // C3 | E3 G3 C4
      [45, 52, 57, 60], // A2 | E3 A3 C4
      [41, 48, 53, 57], // F2 | C3 F3 A3
      [43, 50, 55, 59], // G2 | D3 G3 B3
    ],
    bar(voice, t, beat, i) {
      // Long swelling pad chords that overlap, so the level never drops.
      const chord = this.chords[i % 4];
      const length = 8 * beat;
      for (const n of chord.slice(1)) {
        voice.tone(midi(n), t, length * 1.5, { gain: 0.13, attack: 2.5, type: "triangle", lowpass: 700 });
      }
      voice.tone(midi(chord[0]), t, length * 1.5, { gain: 0.05, attack: 2.5, type: "sine" });
      // A sparse shimmer far above the pad.
      voice.tone(midi(chord[3] + 24), t + 2 * beat, 3 * beat, { gain: 0.012, attack: 1, type: "sine" });
    },
  },
  lofi: {
    bpm: 78,
    beats: 4,
    roots: [45, 41, 43, 40], // A2 F2 G2 E2: the sub bass an octave below
    keys: [
      [57, 60, 64, 67],
      [53, 57, 60, 64],
      [55, 59, 62, 65],
      [52, 56, 59, 62],
    ],
    bar(voice, t, beat, i) {
      // Sub bass held through the bar, and a kick on 1 and 3: the dominant band.
      voice.tone(midi(this.roots[i % 4] - 12), t, 4 * beat, { gain: 0.5, attack: 0.02, type: "sine" });
      for (const k of [0, 2, 2.5]) voice.kick(t + k * beat, 0.35);
      // Muffled keys and a snare on 2 and 4, quiet and low-passed.
      for (const n of this.keys[i % 4]) {
        voice.tone(midi(n), t + 0.05, 3.5 * beat, { gain: 0.025, attack: 0.05, type: "triangle", lowpass: 900 });
      }
      for (const k of [1, 3]) voice.noise(t + k * beat, 0.15, { gain: 0.06, lowpass: 3000, highpass: 800 });
      // Vinyl crackle.
      for (let k = 0; k < 6; k++) voice.noise(t + ((k * 0.61) % 4) * beat, 0.004, { gain: 0.05, highpass: 2000 });
    },
  },
};

/** Schedules one track's notes into a gain node of its own (faded out as a whole). */
class Voice {
  constructor(context, output, noiseBuffer) {
    this.context = context;
    this.out = context.createGain();
    this.out.connect(output);
    this.noiseBuffer = noiseBuffer;
  }

  tone(freq, t, dur, { gain, attack, type, lowpass, bell }) {
    const ctx = this.context;
    const osc = ctx.createOscillator();
    osc.type = type;
    osc.frequency.value = freq;
    const env = ctx.createGain();
    env.gain.setValueAtTime(0, t);
    env.gain.linearRampToValueAtTime(gain, t + attack);
    // A Rhodes-like decay for "bell" notes; otherwise held, then released.
    if (bell) env.gain.setTargetAtTime(gain * 0.5, t + attack, dur / 3);
    else env.gain.setValueAtTime(gain, t + Math.max(attack, dur - 0.5));
    env.gain.linearRampToValueAtTime(0, t + dur);
    let node = osc;
    if (lowpass) {
      const filter = ctx.createBiquadFilter();
      filter.type = "lowpass";
      filter.frequency.value = lowpass;
      node.connect(filter);
      node = filter;
    }
    node.connect(env).connect(this.out);
    osc.start(t);
    osc.stop(t + dur + 0.05);
  }

  kick(t, gain) {
    const ctx = this.context;
    const osc = ctx.createOscillator();
    osc.frequency.setValueAtTime(120, t);
    osc.frequency.exponentialRampToValueAtTime(45, t + 0.12);
    const env = ctx.createGain();
    env.gain.setValueAtTime(gain, t);
    env.gain.exponentialRampToValueAtTime(0.001, t + 0.35);
    osc.connect(env).connect(this.out);
    osc.start(t);
    osc.stop(t + 0.4);
  }

  noise(t, dur, { gain, highpass, lowpass }) {
    const ctx = this.context;
    const src = ctx.createBufferSource();
    src.buffer = this.noiseBuffer;
    let node = src;
    for (const [type, freq] of [["highpass", highpass], ["lowpass", lowpass]]) {
      if (!freq) continue;
      const filter = ctx.createBiquadFilter();
      filter.type = type;
      filter.frequency.value = freq;
      node.connect(filter);
      node = filter;
    }
    const env = ctx.createGain();
    env.gain.setValueAtTime(gain, t);
    env.gain.exponentialRampToValueAtTime(0.001, t + dur);
    node.connect(env).connect(this.out);
    src.start(t, Math.random() * 0.5);
    src.stop(t + dur + 0.01);
  }

  fadeOut(at) {
    this.out.gain.setTargetAtTime(0, at, FADE_S / 4);
    setTimeout(() => this.out.disconnect(), (FADE_S + 0.2) * 1000);
  }
}

export class BackgroundMusic {
  /** @param {AudioContext} context */
  constructor(context) {
    this.context = context;
    this.track = "off";
    this.bus = new GainNode(context, { gain: LEVEL });
    this.ducker = new GainNode(context, { gain: 1 });
    this.analyser = new AnalyserNode(context, { fftSize: 4096, smoothingTimeConstant: 0.7 });
    this.bus.connect(this.ducker);
    this.ducker.connect(context.destination);
    this.ducker.connect(this.analyser);
    const noise = context.createBuffer(1, context.sampleRate, context.sampleRate);
    const data = noise.getChannelData(0);
    for (let i = 0; i < data.length; i++) data[i] = Math.random() * 2 - 1;
    this.noiseBuffer = noise;
    this.voice = null;
    this.timer = 0;
    this.ducked = false;
    this.freq = new Float32Array(this.analyser.frequencyBinCount);
    this.wave = new Float32Array(this.analyser.fftSize);
  }

  /** Play `track` ("jazz", "ambient", "lofi"), or "off". Throws for another name. */
  play(track) {
    if (track !== "off" && !TRACKS.includes(track)) {
      throw new RangeError(`unknown track ${JSON.stringify(track)}; expected one of ${[...TRACKS, "off"].join(", ")}`);
    }
    this.stop();
    this.track = track;
    if (track === "off") return;
    const score = SCORES[track];
    const beat = 60 / score.bpm;
    const voice = new Voice(this.context, this.bus, this.noiseBuffer);
    this.voice = voice;
    let next = this.context.currentTime + 0.05;
    let bar = 0;
    const schedule = () => {
      while (next < this.context.currentTime + LOOKAHEAD_S) {
        score.bar(voice, next, beat, bar++);
        next += score.beats * beat;
      }
    };
    schedule();
    this.timer = setInterval(schedule, TICK_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.voice?.fadeOut(this.context.currentTime);
    this.voice = null;
    this.track = "off";
  }

  /** Lower the music while the agent speaks; bring it back after. */
  duck(on) {
    if (on === this.ducked) return;
    this.ducked = on;
    const gain = this.ducker.gain;
    const now = this.context.currentTime;
    gain.cancelScheduledValues(now);
    gain.setTargetAtTime(on ? DUCK_GAIN : 1, now, on ? DUCK_ATTACK_S : DUCK_RELEASE_S);
  }

  /** What the analyser hears now: the loudest frequency (20 Hz–5 kHz) and the RMS level. */
  reading() {
    const { analyser, freq, wave } = this;
    analyser.getFloatFrequencyData(freq);
    analyser.getFloatTimeDomainData(wave);
    const hzPerBin = this.context.sampleRate / analyser.fftSize;
    let best = -Infinity;
    let bin = 0;
    for (let i = Math.ceil(20 / hzPerBin); i < Math.min(freq.length, 5000 / hzPerBin); i++) {
      if (freq[i] > best) {
        best = freq[i];
        bin = i;
      }
    }
    let sum = 0;
    for (const x of wave) sum += x * x;
    const rms = Math.sqrt(sum / wave.length);
    return {
      track: this.track,
      ducked: this.ducked,
      duckGain: this.ducker.gain.value,
      dominantHz: best === -Infinity ? null : bin * hzPerBin,
      levelDb: rms > 0 ? 20 * Math.log10(rms) : -Infinity,
    };
  }

  close() {
    this.stop();
    this.ducker.disconnect();
  }
}
