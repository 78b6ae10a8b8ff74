/**
 * The root README's quick start, from `dist`: the first run charges, the retry is a replay of the
 * same receipt.
 */
import { Effect } from "effect"
import { deepStrictEqual, strictEqual } from "node:assert"
import { program } from "./snippets/quickstart.js"

const { first, retry } = await Effect.runPromise(program)
strictEqual(first.replayed, false, "the first run executes")
strictEqual(retry.replayed, true, "the retry is a replay")
deepStrictEqual(retry.value, first.value, "the retry gets the recorded receipt")
console.log(`quickstart: first ${JSON.stringify(first.value)}, retry replayed`)
