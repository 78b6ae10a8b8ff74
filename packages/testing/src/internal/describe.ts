import type { Idempotency } from "@effect-idempotency/core"
import { IdempotencyError } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as format from "./format.js"
import type * as trace from "./trace.js"

/** @internal */
export const describeError = (error: unknown): string => {
  if (IdempotencyError.isIdempotencyError(error)) {
    switch (error._tag) {
      case "DownstreamTimeout":
        return `DownstreamTimeout (policy ${error.policy}${error.replayed ? ", replayed" : ""})`
      case "IdempotencyConflict":
        return `IdempotencyConflict (retry after ${format.millis(error.retryAfterMillis)})`
      case "LeaseLost":
        return `LeaseLost (on ${error.method})`
      case "CleanupFailed":
        return `CleanupFailed (policy ${error.policy})`
      case "StoreUnavailable":
      case "StoreError":
        return `${error._tag} (on ${error.method})`
      default:
        return error._tag
    }
  }
  if (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string") {
    return "code" in error && typeof error.code === "string" ? `${error._tag} (${error.code})` : error._tag
  }
  return format.short(error)
}

/** @internal */
export const describeExit = <A>(exit: Exit.Exit<Idempotency.Result<A>, unknown>): string => {
  if (Exit.isSuccess(exit)) {
    const result = exit.value
    const notes = [result.replayed ? "replayed" : "fresh", ...(result.recorded ? [] : ["not recorded"])]
    return `returns ${format.short(result.value)} (${notes.join(", ")})`
  }
  if (Cause.isInterruptedOnly(exit.cause)) return "crashes"
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return `fails: ${describeError(failure.value)}`
  return `dies: ${Cause.pretty(exit.cause).split("\n")[0]}`
}

/** @internal */
export const renderTimeline = (caseTrace: trace.Trace, start: number): string =>
  caseTrace.events
    .slice()
    .sort((a, b) => a.at - b.at || a.seq - b.seq)
    .map((event) => {
      const prefix = event.source === "store"
        ? "store "
        : event.source === "fault"
        ? "FAULT "
        : event.source === "downstream"
        ? "downstream "
        : ""
      return `  ${format.offset(event.at - start).padEnd(14)}${(event.attempt ?? "").padEnd(11)}${prefix}${event.text}`
    })
    .join("\n")
