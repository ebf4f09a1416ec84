/**
 * express-openapi-validator with route matching compiled once and its steps run as one.
 *
 * Upstream 5.6.2 finds the operation of each request by calling path-to-regexp's `pathToRegexp`
 * for every route of the contract, on every request, until one matches (its
 * `middlewares/openapi.metadata.js`, `lookupRoute`; cdimascio/express-openapi-validator#1217 is the
 * unmerged fix). That compile was the validator's largest cost per request. And its
 * `installMiddleware` makes each step a layer that awaits the loaded spec again on every request.
 * This module loads and checks the spec exactly as the package's own `middleware()` does, builds
 * each step with the package's own factory, replaces only the matching step (the same rules over
 * regular expressions compiled on first use; the latest paths' matches remembered) and runs the
 * steps in series once the spec is loaded.
 * Request and response validation and their errors are the package's own code. Upstream's
 * `app.param` hook for path parameters is not installed: mds routes by operation (app.ts), and sets
 * `req.params` from the matched operation itself.
 *
 * It relies on the package's internals: `OpenApiValidator`'s normalised `options`, `ajvOpts` and step
 * factories (`metadataMiddleware`, `requestValidationMiddleware`, `responseValidationMiddleware`),
 * `SchemaPreprocessor` and the shape of `OpenApiContext`. test/integration/openapi-validator.test.ts
 * pins the version, checks those internals are there and compares this matcher with upstream's on
 * the real contract, so an upgrade that changes any of them fails there first.
 */
import { createRequire } from 'node:module';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { OpenApiRequestMetadata, OpenApiValidatorOpts } from 'express-openapi-validator/dist/framework/types.js';
import QuickLRU from 'quick-lru';
import { series } from './series.js';

/** What the validator's metadata step puts on `req.openapi`: the operation found and its path parameters. */
export type { OpenApiRequestMetadata };

const requireHere = createRequire(import.meta.url);
const validatorMain = requireHere.resolve('express-openapi-validator');
// Resolved from the validator's own location, so the matcher uses the very copy it would.
const requireFromValidator = createRequire(validatorMain);
const internal = (path: string): unknown => requireHere(`express-openapi-validator/${path}`);

/** The version whose internals this module was written against (checked by the test, not at runtime). */
export const WRAPPED_VALIDATOR_VERSION = '5.6.2';

interface RouteMethods {
  basePath: string;
  _expressRoute: string;
  _openApiRoute: string;
  [method: string]: unknown;
}

/** What the metadata step reads from upstream's `OpenApiContext`. */
export interface ValidatorContext {
  apiDoc: { paths: Record<string, Record<string, unknown>> };
  expressRouteMap: Record<string, RouteMethods>;
  openApiRouteMap: Record<string, RouteMethods>;
  useRequestUrl: boolean;
  ignoreUndocumented: boolean;
  serial: number;
  isManagedRoute(path: string): boolean;
  shouldIgnoreRoute(path: string): unknown;
  routePair(route: string): { expressRoute: string; openApiRoute: string } | null;
}

type ResponseApiDoc = { paths: Record<string, Record<string, unknown>> } | undefined | null;
type MetadataFactory = (context: ValidatorContext, responseApiDoc: ResponseApiDoc) => RequestHandler;
/**
 * Takes the refusal of a request whose path matched an operation but holds a value that is not valid
 * percent-encoding; the metadata step then goes on with the operation found instead of failing.
 */
type MalformedPathSink = (req: Request, refusal: Error) => void;

/** What this module uses of upstream's `OpenApiValidator`: its normalised options and its step factories. */
interface ValidatorInternals {
  options: OpenApiValidatorOpts & { validateApiSpec: boolean; $refParser: unknown };
  ajvOpts: { preprocessor: unknown };
  metadataMiddleware: MetadataFactory;
  requestValidationMiddleware(apiDoc: unknown): RequestHandler;
  responseValidationMiddleware(apiDoc: unknown, serial: number): RequestHandler;
}

const { OpenApiValidator } = internal('dist/openapi.validator.js') as {
  OpenApiValidator: (new (options: OpenApiValidatorOpts) => ValidatorInternals) & { prototype: ValidatorInternals };
};
const { OpenApiSpecLoader } = internal('dist/framework/openapi.spec.loader.js') as {
  OpenApiSpecLoader: new (options: { apiDoc: unknown; validateApiSpec?: boolean; $refParser?: unknown }) => { load(): Promise<unknown> };
};
const { OpenApiContext } = internal('dist/framework/openapi.context.js') as {
  OpenApiContext: new (spec: unknown, ignorePaths: unknown, ignoreUndocumented: unknown, useRequestUrl: unknown) => ValidatorContext;
};
const { SchemaPreprocessor } = internal('dist/middlewares/parsers/schema.preprocessor.js') as {
  SchemaPreprocessor: new (apiDoc: unknown, ajvOptions: unknown, validateResponses: unknown) => { preProcess(): { apiDocRes: ResponseApiDoc } };
};
const { MethodNotAllowed, NotFound, BadRequest } = internal('dist/framework/types.js') as Record<
  'MethodNotAllowed' | 'NotFound' | 'BadRequest',
  new (args: { path: string; message: string; headers?: Record<string, string> }) => Error
>;
const { httpMethods } = internal('dist/middlewares/parsers/schema.preprocessor.js') as { httpMethods: Set<string> };
const { pathToRegexp } = requireFromValidator('path-to-regexp') as {
  pathToRegexp: (path: string, options: { sensitive: boolean; strict: boolean }) => { regexp: RegExp; keys: Array<{ name: string }> };
};

/** The upstream metadata factory, for the test that compares both. */
export const upstreamMetadataMiddleware: MetadataFactory = (context, responseApiDoc) =>
  OpenApiValidator.prototype.metadataMiddleware.call(undefined, context, responseApiDoc);

/** True when the installed package still has every internal this module uses. */
export function validatorInternalsPresent(): boolean {
  const proto = OpenApiValidator.prototype;
  return (
    typeof proto.metadataMiddleware === 'function' &&
    typeof proto.requestValidationMiddleware === 'function' &&
    typeof proto.responseValidationMiddleware === 'function' &&
    typeof OpenApiContext === 'function' &&
    typeof SchemaPreprocessor === 'function'
  );
}

/** How many request paths the matcher remembers, and the longest it remembers. */
const REMEMBERED_PATHS = 1000;
const REMEMBERED_PATH_LENGTH = 256;

interface CompiledRoute {
  expressRoute: string;
  openApiRoute: string;
  /** The OpenAPI path key in `apiDoc.paths` (the route without its base path). */
  pathKey: string;
  /** One compiled form per routing mode: index `sensitive * 2 + strict`. */
  compiled: Array<{ regexp: RegExp; paramKeys: string[] } | undefined>;
}

/**
 * Upstream's metadata step (sets `req.openapi` and `req.params`, 405 with `Allow` on a known path with
 * another method, 404 on an unknown path under a base path), with each route's expression compiled
 * once per routing mode instead of once per request.
 *
 * A path parameter that is not valid percent-encoding (`/api/admin/users/%zz`) fails this step as it
 * fails upstream's, unless `onMalformedPath` is given: then the operation is still found (its value
 * left as it came) and the refusal handed over, to be answered once the caller's rights are checked.
 */
export const precompiledMetadataMiddleware = (context: ValidatorContext, responseApiDoc: ResponseApiDoc, onMalformedPath?: MalformedPathSink): RequestHandler => {
  const routes: CompiledRoute[] = Object.entries(context.expressRouteMap).map(([expressRoute, methods]) => {
    const openApiRoute = context.routePair(expressRoute)!.openApiRoute;
    return { expressRoute, openApiRoute, pathKey: openApiRoute.substring(methods.basePath.length), compiled: [] };
  });

  /**
   * The first route (in contract order) that `path` matches in routing `mode`, with the raw values of
   * its parameters; null when none does. Paths of a usual length are remembered (the latest
   * `REMEMBERED_PATHS`), so a path asked again costs one Map lookup instead of one expression per route.
   */
  const recent = new QuickLRU<string, { route: CompiledRoute; paramKeys: string[]; raw: string[] } | null>({ maxSize: REMEMBERED_PATHS });
  const match = (path: string, mode: number, sensitive: boolean, strict: boolean) => {
    const key = `${mode}${path}`;
    const remembered = recent.get(key);
    if (remembered !== undefined) return remembered;
    let found: { route: CompiledRoute; paramKeys: string[]; raw: string[] } | null = null;
    for (const route of routes) {
      let compiled = route.compiled[mode];
      if (!compiled) {
        const { regexp, keys } = pathToRegexp(route.expressRoute, { sensitive, strict });
        compiled = { regexp, paramKeys: keys.map((k) => k.name) };
        route.compiled[mode] = compiled;
      }
      const matched = compiled.regexp.exec(path);
      if (matched) {
        found = { route, paramKeys: compiled.paramKeys, raw: matched.slice(1) };
        break;
      }
    }
    if (path.length <= REMEMBERED_PATH_LENGTH) recent.set(key, found);
    return found;
  };

  const lookupRoute = (req: Request) => {
    const path = (context.useRequestUrl ? req.url : req.originalUrl).split('?')[0]!;
    const method = req.method.toLowerCase();
    const sensitive = req.app.enabled('case sensitive routing');
    const strict = req.app.enabled('strict routing');
    const found = match(path, (sensitive ? 2 : 0) + (strict ? 1 : 0), sensitive, strict);
    if (found === null) return null;
    const { route, paramKeys, raw } = found;
    // Decoded and built afresh for every request: later steps may change req.params.
    const pathParams: Record<string, string> = {};
    let malformed: Error | undefined;
    for (let i = 0; i < paramKeys.length; i += 1) {
      try {
        pathParams[paramKeys[i]!] = decodeURIComponent(raw[i]!);
      } catch {
        malformed = new BadRequest({ path: req.path, message: `malformed uri'` });
        if (onMalformedPath === undefined) throw malformed;
        pathParams[paramKeys[i]!] = raw[i]!;
      }
    }
    return {
      malformed,
      schema: context.apiDoc.paths[route.pathKey]?.[method],
      _responseSchema: responseApiDoc?.paths[route.pathKey]?.[method],
      expressRoute: route.expressRoute,
      openApiRoute: route.openApiRoute,
      pathParams,
    };
  };

  return (req: Request, _res: Response, next: NextFunction) => {
    const path = req.path.startsWith(req.baseUrl) ? req.path : `${req.baseUrl}/${req.path}`;
    if (context.shouldIgnoreRoute(path)) {
      next();
      return;
    }
    const matched = lookupRoute(req);
    if (matched) {
      const { expressRoute, openApiRoute, pathParams, schema, malformed } = matched;
      if (!schema) {
        if (context.ignoreUndocumented) {
          next();
          return;
        }
        throw new MethodNotAllowed({
          path: req.path,
          message: `${req.method} method not allowed`,
          headers: {
            Allow: Object.keys(context.openApiRouteMap[openApiRoute]!)
              .filter((key) => httpMethods.has(key.toLowerCase()))
              .join(', '),
          },
        });
      }
      const openapi: Record<string, unknown> = { expressRoute, openApiRoute, pathParams, schema, serial: context.serial };
      if (responseApiDoc) openapi._responseSchema = matched._responseSchema;
      (req as unknown as { openapi: unknown }).openapi = openapi;
      req.params = pathParams;
      if (malformed !== undefined) onMalformedPath?.(req, malformed);
    } else if (context.isManagedRoute(path) && !context.ignoreUndocumented) {
      throw new NotFound({ path: req.path, message: 'not found' });
    }
    next();
  };
};

/**
 * `validateRequest`, skipped where it could only pass: an operation that declares no parameters (on
 * itself or its path) and no request body, called without a query string and without a body, has
 * nothing the request step could find wrong (no parameter to parse or coerce, no unknown query
 * parameter, no body). Upstream still builds a parameter mutator, redefines `req.query` and runs the
 * schema on such a request, about 5 % of a health or admin-status call. Any query string or body
 * goes through the package's step as before; the integration test compares both on every operation.
 */
function unlessNothingToValidate(apiDoc: ValidatorContext['apiDoc'], validateRequest: RequestHandler): RequestHandler {
  const takesNothing = new WeakSet<object>();
  for (const pathItem of Object.values(apiDoc.paths)) {
    const pathParameters = (pathItem as { parameters?: unknown[] }).parameters ?? [];
    for (const [method, operation] of Object.entries(pathItem)) {
      if (!httpMethods.has(method) || typeof operation !== 'object' || operation === null) continue;
      const { parameters = [], requestBody } = operation as { parameters?: unknown[]; requestBody?: unknown };
      // The package's preprocessing leaves `requestBody: null` on operations without one.
      if (pathParameters.length === 0 && parameters.length === 0 && (requestBody === undefined || requestBody === null)) takesNothing.add(operation);
    }
  }
  return (req, res, next) => {
    const schema = req.openapi?.schema;
    if (
      schema !== undefined &&
      takesNothing.has(schema) &&
      !req.originalUrl.includes('?') &&
      req.headers['content-length'] === undefined &&
      req.headers['transfer-encoding'] === undefined
    ) {
      next();
      return;
    }
    validateRequest(req, res, next);
  };
}

/**
 * Same as the package's `middleware(options)` (the spec is loaded and checked the same way, and each
 * step is built by the package's own factory), with the route matching compiled once and the steps
 * run as one: upstream's `installMiddleware` gives every step a layer of its own that waits on the
 * loaded spec again (a promise hop per step, per request); here the spec is awaited by the first
 * requests only, then the steps run in series. `options.apiSpec` must be a document the validator may
 * mutate. Only what mds uses is supported: no security handlers (`security.ts` checks the contract's
 * security), no multipart uploads, no operation handlers.
 */
export function openApiValidatorMiddleware(
  options: OpenApiValidatorOpts,
  /** Steps run once the operation is known and before its input is validated (the rights check, the body parser); a path that is not valid percent-encoding is refused after them. */
  between: readonly RequestHandler[] = [],
): RequestHandler {
  if (options.validateSecurity !== false || options.fileUploader !== false || options.operationHandlers) {
    throw new TypeError('openApiValidatorMiddleware runs without validateSecurity, fileUploader and operationHandlers: set the first two to false');
  }
  const validator = new OpenApiValidator(options);
  const normalized = validator.options;
  const loaded = new OpenApiSpecLoader({ apiDoc: options.apiSpec, validateApiSpec: normalized.validateApiSpec, $refParser: normalized.$refParser })
    .load()
    .then((spec) => {
      const { apiDoc } = spec as { apiDoc: ValidatorContext['apiDoc'] };
      const responseApiDoc = new SchemaPreprocessor(apiDoc, validator.ajvOpts.preprocessor, normalized.validateResponses).preProcess().apiDocRes;
      const context = new OpenApiContext(spec, normalized.ignorePaths, normalized.ignoreUndocumented, normalized.useRequestUrl);
      // A path value that is not valid percent-encoding is bad input like any other: refused (422)
      // after the steps in `between`, so a caller who may not call the operation hears 401/403 instead.
      const malformedPaths = new WeakMap<Request, Error>();
      const steps = [precompiledMetadataMiddleware(context, responseApiDoc, (req, refusal) => malformedPaths.set(req, refusal)), ...between];
      const validateInput = normalized.validateRequests ? unlessNothingToValidate(apiDoc, validator.requestValidationMiddleware(apiDoc)) : undefined;
      steps.push((req, res, next) => {
        const malformed = malformedPaths.get(req);
        if (malformed !== undefined) next(malformed);
        else if (validateInput !== undefined) validateInput(req, res, next);
        else next();
      });
      if (normalized.validateResponses) steps.push(validator.responseValidationMiddleware(responseApiDoc, context.serial));
      return series(steps);
    });
  let validate: RequestHandler | undefined;
  // A spec that fails to load fails every request with its error, as upstream's steps do.
  loaded.then((ready) => (validate = ready), () => undefined);
  return (req, res, next) => {
    if (validate !== undefined) validate(req, res, next);
    else loaded.then((ready) => ready(req, res, next)).catch(next);
  };
}
