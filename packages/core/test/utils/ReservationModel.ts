/**
 * What the store can answer to one reservation, and the rules of the exit table for the answer an
 * attempt gives: shared by the checker of the reservation's machine (`ReservationMachine.test.ts`)
 * and the run of the same sequences through the real engine (`ReservationSpace.test.ts`).
 */
import { IdempotencyError, IdempotencyRecord } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Option from "effect/Option"
import * as Reservation from "../../src/internal/reservation.js"

export type StoreAnswer =
  | "reserved"
  | "live"
  | "completed"
  | "otherFingerprint"
  | "unknown"
  | "expired"
  | "failed"
  /** Cut off by the attempt's deadline: the store may have applied it. */
  | "cutOff"

export const storeAnswers: ReadonlyArray<StoreAnswer> = [
  "reserved",
  "live",
  "completed",
  "otherFingerprint",
  "unknown",
  "expired",
  "failed",
  "cutOff"
]

export type Outcome =
  | "executed"
  | "replayed"
  | "IdempotencyConflict"
  | "KeyReused"
  | "DownstreamTimeout"
  | "StoreUnavailable"

/** What the attempt answers when the store's last answer is `answer`. */
export const expectedOutcome = (answer: StoreAnswer): Outcome => {
  switch (answer) {
    case "reserved":
      return "executed"
    case "live":
      return "IdempotencyConflict"
    case "completed":
      return "replayed"
    case "otherFingerprint":
      return "KeyReused"
    case "unknown":
    case "expired":
      return "DownstreamTimeout"
    case "failed":
    case "cutOff":
      return "StoreUnavailable"
  }
}

/** The outcome a machine's answer stands for, named as `expectedOutcome` names them. */
export const outcomeOf = (answer: Reservation.Answer): string => {
  switch (answer._tag) {
    case "Execute":
      return "executed"
    case "Replay":
      // a recorded timeout is replayed as the error it stands for
      return answer.record.outcome?._tag === "Timeout" ? "DownstreamTimeout" : "replayed"
    case "Refused":
      return answer.error._tag
    case "Fail": {
      const failure = Cause.failureOption(answer.cause)
      return Option.isSome(failure) ? (failure.value as { readonly _tag: string })._tag : "defect"
    }
  }
}

const FINGERPRINT = "fingerprint"

/** How long a live conflict's lease has left when the store answers. */
export const LIVE_LEASE = 300

/**
 * The machine's event for the store's `answer` to a reservation sent at `sentAt`, seen at `now`;
 * a record found is the attempt's own payload when it has `fingerprint`.
 */
export const storeEvent = (
  answer: StoreAnswer,
  sentAt: number,
  now: number,
  fingerprint = FINGERPRINT
): Reservation.Event => {
  const existing = (
    status: IdempotencyRecord.Status,
    recorded: string,
    leaseUntil: number,
    outcome: IdempotencyRecord.StoredOutcome | undefined
  ): Reservation.Event => ({
    _tag: "StoreAnswered",
    result: IdempotencyRecord.ReserveResult.Existing({
      record: {
        status,
        token: "another-attempt",
        fingerprint: recorded,
        attempt: 1,
        leaseUntil,
        expiresAt: leaseUntil + 60_000,
        outcome
      },
      now: sentAt
    }),
    sentAt,
    now
  })
  const stored = IdempotencyRecord.StoredOutcome.Success({ value: "\"stored\"" })
  switch (answer) {
    case "reserved":
      return {
        _tag: "StoreAnswered",
        result: IdempotencyRecord.ReserveResult.Reserved({
          token: "t",
          attempt: 1,
          leaseUntil: sentAt + 1_000,
          expiresAt: sentAt + 60_000
        }),
        sentAt,
        now
      }
    case "live":
      return existing("IN_PROGRESS", fingerprint, sentAt + LIVE_LEASE, undefined)
    case "completed":
      return existing("COMPLETED", fingerprint, sentAt, stored)
    case "otherFingerprint":
      return existing("COMPLETED", "another", sentAt, stored)
    case "unknown":
      return existing("COMPLETED", fingerprint, sentAt, IdempotencyRecord.StoredOutcome.Timeout())
    case "expired":
      return existing("IN_PROGRESS", fingerprint, sentAt - 1, undefined)
    case "failed":
      return {
        _tag: "StoreFailed",
        cause: Cause.fail(new IdempotencyError.StoreUnavailable({ method: "reserve", cause: "injected" })),
        cutOff: false
      }
    case "cutOff":
      return {
        _tag: "StoreFailed",
        cause: Cause.fail(new IdempotencyError.StoreUnavailable({ method: "reserve", cause: "cut off" })),
        cutOff: true
      }
  }
}

export const config = (options: {
  readonly waits: boolean
  readonly until: number
  readonly deadline: number
  readonly timeoutMs: number
}): Reservation.Config => ({
  operation: "reservation",
  key: "k",
  fingerprint: FINGERPRINT,
  onTimeout: "markUnknown",
  ...options
})

/**
 * Runs the machine over the store's `answers`, one per reservation, each a given `waited` answer
 * of the schedule between them; returns the store methods its commands call, in order, and its
 * answer.
 */
export const replay = (
  cfg: Reservation.Config,
  answers: ReadonlyArray<StoreAnswer>,
  now: number
): { readonly calls: ReadonlyArray<string>; readonly answer: Reservation.Answer } => {
  const calls: Array<string> = []
  let used = 0
  let [state, command] = Reservation.start(cfg)
  for (;;) {
    switch (command._tag) {
      case "Answer":
        return { calls, answer: command.answer }
      case "Reserve":
        calls.push("reserve")
        ;[state, command] = Reservation.step(cfg, state, storeEvent(answers[used++] ?? "live", now, now))
        break
      case "Wait":
        ;[state, command] = Reservation.step(cfg, state, { _tag: "Waited", again: used < answers.length })
        break
      case "GiveBack":
        calls.push("release")
        ;[state, command] = Reservation.step(cfg, state, { _tag: "GivenBack" })
        break
    }
  }
}
