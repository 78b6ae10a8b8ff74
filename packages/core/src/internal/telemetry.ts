/**
 * What a run reports, the same on its span and its metrics (root README.md#operations-metrics-and-traces).
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import type * as MetricLabel from "effect/MetricLabel"
import * as MetricLabels from "effect/MetricLabel"
import * as Option from "effect/Option"
import type { Result } from "../Attempt.js"
import { isIdempotencyError } from "../IdempotencyError.js"

export type Outcome =
  | "executed"
  | "takeover"
  | "unrecorded"
  | "replayed"
  | "conflict"
  | "key_reused"
  | "timeout"
  | "lease_lost"
  | "store_unavailable"
  | "cleanup_failed"
  | "invalid_key"
  | "invalid_payload"
  | "not_replayable"
  | "stored_outcome_invalid"
  | "failed"
  | "defect"
  | "interrupted"

const byTag: Readonly<Record<string, Outcome>> = {
  IdempotencyConflict: "conflict",
  KeyReused: "key_reused",
  DownstreamTimeout: "timeout",
  LeaseLost: "lease_lost",
  StoreUnavailable: "store_unavailable",
  StoreError: "store_unavailable",
  CleanupFailed: "cleanup_failed",
  InvalidIdempotencyKey: "invalid_key",
  InvalidPayload: "invalid_payload",
  OutcomeNotReplayable: "not_replayable",
  StoredOutcomeInvalid: "stored_outcome_invalid"
}

export const ofResult = (result: Result<unknown>): Outcome =>
  result.replayed ? "replayed" : !result.recorded ? "unrecorded" : result.attempt > 1 ? "takeover" : "executed"

/** A replayed outcome (a timeout or an omitted one) counts as replayed. */
export const ofError = (error: unknown): Outcome => {
  if (!isIdempotencyError(error)) return "failed"
  if ((error as { readonly replayed?: unknown }).replayed === true) return "replayed"
  return byTag[error._tag] ?? "failed"
}

export const ofCause = (cause: Cause.Cause<unknown>): Outcome => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return ofError(failure.value)
  return Cause.isInterruptedOnly(cause) ? "interrupted" : "defect"
}

// Effect's metric keys have no unit: `@effect/opentelemetry` exports a key's `unit` label as the
// instrument's unit (and, as every label, as an attribute); without it, the exporter says `1`.
const attempts = MetricKey.tagged(
  MetricKey.counter("idempotency.attempts", {
    description: "Runs of idempotent operations, by operation and outcome",
    incremental: true
  }),
  "unit",
  "{attempt}"
)

const duration = MetricKey.tagged(
  MetricKey.histogram(
    "idempotency.attempt.duration",
    // 0.001 s to 65.536 s, doubling: `count` includes the last, infinite, bucket
    MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 18 }),
    "Duration of runs of idempotent operations, in seconds, by operation and outcome"
  ),
  "unit",
  "s"
)

interface Metrics {
  readonly attempts: Metric.Metric.Counter<number>
  readonly duration: Metric.Metric.Histogram<number>
}

/** The metrics of each operation and outcome, built once: an update finds its hook without a key. */
const reporters = new Map<string, Reporter>()

export type Reporter = (outcome: Outcome, millis: number, labels: ReadonlyArray<MetricLabel.MetricLabel>) => void

export const reporter = (operation: string): Reporter => {
  let found = reporters.get(operation)
  if (found === undefined) {
    const byOutcome = new Map<Outcome, Metrics>()
    found = (outcome, millis, labels) => {
      let metrics = byOutcome.get(outcome)
      if (metrics === undefined) {
        const tags = [
          MetricLabels.make("idempotency.operation", operation),
          MetricLabels.make("idempotency.outcome", outcome)
        ]
        metrics = {
          attempts: Metric.fromMetricKey(MetricKey.taggedWithLabels(attempts, tags)),
          duration: Metric.fromMetricKey(MetricKey.taggedWithLabels(duration, tags))
        }
        byOutcome.set(outcome, metrics)
      }
      metrics.attempts.unsafeUpdate(1, labels)
      metrics.duration.unsafeUpdate(millis / 1000, labels)
    }
    reporters.set(operation, found)
  }
  return found
}
