const SHIM = new URL("./node20-fs.mjs", import.meta.url).href;

export async function resolve(specifier, context, next) {
  const fromPackage = context.parentURL?.includes("/@modelcontextprotocol/conformance/");
  if (fromPackage && (specifier === "fs" || specifier === "node:fs")) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
