/**
 * The operation every contender runs: a charge whose downstream returns a small receipt at once,
 * so that what is measured is the idempotency layer and its store, not the downstream.
 */
import * as Schema from "effect/Schema"

export const Payload = Schema.Struct({ customerId: Schema.String, amountCents: Schema.Int })
export type Payload = typeof Payload.Type

export const Receipt = Schema.Struct({ chargeId: Schema.String, amountCents: Schema.Int })
export type Receipt = typeof Receipt.Type

/** The payload of the call with `key` (the customer id carries the key, to find a hold). */
export const payloadFor = (key: string): Payload => ({ customerId: key, amountCents: 1999 })

const receiptFor = (payload: Payload): Receipt => ({
  chargeId: `ch_${payload.customerId}`,
  amountCents: payload.amountCents
})

/** A call held inside its downstream until released (to measure the conflict path). */
export interface Hold {
  /** Resolves once the downstream was entered. */
  readonly entered: Promise<void>
  readonly release: () => void
}

/**
 * The downstream of one contender: it counts its executions (so a replay that executed is
 * caught) and blocks the calls that hold a key.
 */
export class Downstream {
  executions = 0
  private readonly holds = new Map<string, { readonly enter: () => void; readonly proceed: Promise<void> }>()

  /** The next call with this payload's key enters and then waits for `release`. */
  hold(key: string): Hold {
    let enter = () => {}
    let release = () => {}
    const entered = new Promise<void>((resolve) => (enter = resolve))
    const proceed = new Promise<void>((resolve) => (release = resolve))
    this.holds.set(key, { enter, proceed })
    return { entered, release }
  }

  /** The receipt at once, or, for a held key, once released. */
  charge(payload: Payload): Receipt | Promise<Receipt> {
    this.executions++
    const hold = this.holds.get(payload.customerId)
    if (hold === undefined) return receiptFor(payload)
    this.holds.delete(payload.customerId)
    hold.enter()
    return hold.proceed.then(() => receiptFor(payload))
  }
}
