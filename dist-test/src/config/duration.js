const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 };
/** Matches a duration string: whole seconds, or a number with one unit (`90s`, `30m`, `24h`, `7d`). */
export const DURATION_PATTERN = '^[0-9]+(s|m|h|d)?$';
/**
 * Parses a validated duration into seconds.
 * @example parseDuration('30m') // 1800
 */
export function parseDuration(value) {
    if (typeof value === 'number')
        return value;
    const unit = value.at(-1);
    const factor = UNIT_SECONDS[unit];
    return factor === undefined ? Number(value) : Number(value.slice(0, -1)) * factor;
}
/**
 * Formats seconds with the largest unit that divides them exactly.
 * @example formatDuration(86400) // '1d'
 */
export function formatDuration(seconds) {
    if (seconds === 0)
        return '0s';
    for (const unit of ['d', 'h', 'm']) {
        if (seconds % UNIT_SECONDS[unit] === 0)
            return `${seconds / UNIT_SECONDS[unit]}${unit}`;
    }
    return `${seconds}s`;
}
//# sourceMappingURL=duration.js.map