import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "sql-pg",
      // a suffix of the run's own for table names, and their removal at the end
      globalSetup: ["./test/globalSetup.ts"]
    }
  })
)
