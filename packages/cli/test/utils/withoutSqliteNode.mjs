/**
 * Loaded with `node --import` (through NODE_OPTIONS): the process runs as if
 * `@effect/sql-sqlite-node`, the CLI's optional peer dependency, were not installed.
 */
import { register } from "node:module"

register(
  "data:text/javascript," + encodeURIComponent(`
    export async function resolve(specifier, context, next) {
      if (specifier === "@effect/sql-sqlite-node" || specifier.startsWith("@effect/sql-sqlite-node/")) {
        const error = new Error("Cannot find package '@effect/sql-sqlite-node' imported from " + context.parentURL)
        error.code = "ERR_MODULE_NOT_FOUND"
        throw error
      }
      return next(specifier, context)
    }
  `)
)
