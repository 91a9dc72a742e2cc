/**
 * The share of a lane's recent requests that ended one way, weighing the last `span` or so most:
 * each end counts 1/span, and older ends fade by (1 - 1/span) each. Cheap (one number) and needs no
 * clock: it moves only when requests end.
 */
export class RecentShare {
  readonly #keep: number;
  #share = 0;

  constructor(span: number) {
    this.#keep = 1 - 1 / span;
  }

  /** A request ended: `hit` if it ended the way this counts. */
  add(hit: boolean): void {
    this.#share = this.#share * this.#keep + (hit ? 1 - this.#keep : 0);
  }

  get value(): number {
    return this.#share;
  }
}
