import fp from 'fastify-plugin';
/** Decorates the instance with the shared GatewayContext. */
export const contextPlugin = fp(async (fastify, { context }) => {
    fastify.decorate('gatehouse', context);
}, { name: 'gatehouse-context', fastify: '5.x' });
//# sourceMappingURL=context.js.map