/** What `llmq estimate` reads from a store: the jobs a run would take, and how answers went so far. */

/** A job a run would take now, in the order it would take it. */
export interface JobToRun {
  readonly key: string;
  readonly model: string;
  /** The request JSON, as it would be sent. */
  readonly request: string;
  readonly priority: number;
  /** Attempts used so far: a run fails a job that has used them all instead of sending it. */
  readonly attempts: number;
  /** Answered by the offline mock: done in `status`, and sent again by a run of a real provider. */
  readonly mockAnswered?: boolean;
}

/** One answered job of a model, newest first. */
export interface AnsweredJob {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Latency of the try that answered it, ms; null when a provider batch answered it (SENT_ONLINE) or it was answered before latencies were kept. */
  readonly latencyMs: number | null;
  /** Its request, when asked for (to compare our token count with the provider's). */
  readonly request: string | null;
}
