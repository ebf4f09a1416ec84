/**
 * express-openapi-validator with route matching compiled once.
 *
 * Upstream 5.6.2 finds the operation of each request by calling path-to-regexp's `pathToRegexp`
 * for every route of the contract, on every request, until one matches (its
 * `middlewares/openapi.metadata.js`, `lookupRoute`; cdimascio/express-openapi-validator#1217 is the
 * unmerged fix). That compile was the validator's largest cost per request. This module builds the
 * validator exactly as the package's own `middleware()` does and replaces only that one step, with
 * the same matching rules over regular expressions compiled on first use. Everything else (security,
 * request and response validation, the errors) is the package's own code.
 *
 * It relies on the package's internals: `OpenApiValidator#metadataMiddleware(context, responseApiDoc)`
 * being the factory of that step, and on the shape of `OpenApiContext`. test/unit/openapi-validator.test.ts
 * pins the version and compares this matcher with upstream's on the real contract, so an upgrade that
 * changes either fails there first.
 */
import { createRequire } from 'node:module';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { OpenApiValidatorOpts } from 'express-openapi-validator/dist/framework/types.js';

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

interface ValidatorInternals {
  metadataMiddleware: MetadataFactory;
  installMiddleware(spec: Promise<unknown>): RequestHandler[];
}

const { OpenApiValidator } = internal('dist/openapi.validator.js') as {
  OpenApiValidator: (new (options: OpenApiValidatorOpts) => ValidatorInternals) & { prototype: ValidatorInternals };
};
const { OpenApiSpecLoader } = internal('dist/framework/openapi.spec.loader.js') as {
  OpenApiSpecLoader: new (options: { apiDoc: unknown; validateApiSpec?: boolean; $refParser?: unknown }) => { load(): Promise<unknown> };
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

/** True when the installed package still has the method this module replaces. */
export function validatorInternalsPresent(): boolean {
  return typeof OpenApiValidator.prototype.metadataMiddleware === 'function' && typeof OpenApiValidator.prototype.installMiddleware === 'function';
}

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
 */
export const precompiledMetadataMiddleware: MetadataFactory = (context, responseApiDoc) => {
  const routes: CompiledRoute[] = Object.entries(context.expressRouteMap).map(([expressRoute, methods]) => {
    const openApiRoute = context.routePair(expressRoute)!.openApiRoute;
    return { expressRoute, openApiRoute, pathKey: openApiRoute.substring(methods.basePath.length), compiled: [] };
  });

  const lookupRoute = (req: Request) => {
    const path = (context.useRequestUrl ? req.url : req.originalUrl).split('?')[0]!;
    const method = req.method.toLowerCase();
    const sensitive = req.app.enabled('case sensitive routing');
    const strict = req.app.enabled('strict routing');
    const mode = (sensitive ? 2 : 0) + (strict ? 1 : 0);
    for (const route of routes) {
      let compiled = route.compiled[mode];
      if (!compiled) {
        const { regexp, keys } = pathToRegexp(route.expressRoute, { sensitive, strict });
        compiled = { regexp, paramKeys: keys.map((k) => k.name) };
        route.compiled[mode] = compiled;
      }
      const matched = compiled.regexp.exec(path);
      if (!matched) continue;
      let pathParams: Record<string, string>;
      try {
        const values = matched.slice(1).map((v) => decodeURIComponent(v));
        pathParams = Object.fromEntries(compiled.paramKeys.map((key, i) => [key, values[i]!]));
      } catch {
        throw new BadRequest({ path: req.path, message: `malformed uri'` });
      }
      return {
        schema: context.apiDoc.paths[route.pathKey]?.[method],
        _responseSchema: responseApiDoc?.paths[route.pathKey]?.[method],
        expressRoute: route.expressRoute,
        openApiRoute: route.openApiRoute,
        pathParams,
      };
    }
    return null;
  };

  return (req: Request, _res: Response, next: NextFunction) => {
    const path = req.path.startsWith(req.baseUrl) ? req.path : `${req.baseUrl}/${req.path}`;
    if (context.shouldIgnoreRoute(path)) {
      next();
      return;
    }
    const matched = lookupRoute(req);
    if (matched) {
      const { expressRoute, openApiRoute, pathParams, schema } = matched;
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
    } else if (context.isManagedRoute(path) && !context.ignoreUndocumented) {
      throw new NotFound({ path: req.path, message: 'not found' });
    }
    next();
  };
};

/**
 * Same as the package's `middleware(options)` (the spec is loaded and checked the same way), with
 * the route matching compiled once. `options.apiSpec` must be a document the validator may mutate.
 */
export function openApiValidatorMiddleware(options: OpenApiValidatorOpts): RequestHandler[] {
  const validator = new OpenApiValidator(options);
  // An own property shadows the prototype's factory; installMiddleware calls it on the first request.
  validator.metadataMiddleware = precompiledMetadataMiddleware;
  const spec = new OpenApiSpecLoader({ apiDoc: options.apiSpec, validateApiSpec: options.validateApiSpec, $refParser: options.$refParser }).load();
  return validator.installMiddleware(spec);
}
