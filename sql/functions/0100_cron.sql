-- cron_next: the first occurrence of a parsed cron schedule strictly after p_after
-- (docs/scheduling.md). The sets come from src/storage/cron.cpp (periodic_jobs columns).
--
-- Time zones are PostgreSQL's (GCC 12's libstdc++ has no tz database): occurrences are
-- LOCAL wall-clock times in p_tz, each turned into an instant with `local AT TIME ZONE
-- p_tz`. So every local time that matches fires exactly once, at the instant PostgreSQL
-- maps it to:
--   - spring forward (a gap): a local time that does not exist is read with the offset
--     before the change, e.g. 02:30 on 2026-03-08 in America/New_York is 07:30 UTC
--     (03:30 EDT) — it fires once, an hour "late" by the wall clock;
--   - fall back (an overlap): a local time that occurs twice is read as standard time,
--     e.g. 01:30 on 2026-11-01 in America/New_York is 06:30 UTC (01:30 EST, the second
--     pass) — it fires once, never at 01:30 EDT.
-- Two local times can map to one instant in a gap (02:00 and 03:00 both map to 07:00
-- UTC): that instant fires once.
--
-- The walk: local days from (p_after's local time - 3 h), months not in the set skipped
-- whole, at most 8 years of days (Feb 29 recurs within 8 years: 2096 -> 2104), and
-- within a matching day the chosen hours in order; for each hour, the earliest of its
-- minute x second candidates after p_after, in one set-based SELECT. Because of the gap
-- the local-to-instant mapping is not monotonic, so when the UTC offset changes near the
-- result the walk goes on until a later local time cannot map earlier (3 h past the best
-- candidate's hour: more than any zone's offset change); otherwise the first hit is the
-- answer. Returns NULL when nothing matches within 8 years (such schedules are refused
-- when added).
--
-- @every schedules (p_every_seconds set) ignore the sets and the zone: their occurrences
-- are the multiples of the interval since the Unix epoch.
CREATE OR REPLACE FUNCTION {schema}.cron_next(
    p_seconds integer[], p_minutes integer[], p_hours integer[], p_doms integer[],
    p_months integer[], p_dows integer[], p_dom_restricted boolean, p_dow_restricted boolean,
    p_every_seconds bigint, p_tz text, p_after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_margin     constant interval := interval '3 hours';
    v_start      timestamp;
    v_day        date;
    v_last_day   date;
    v_h          integer;
    v_hour       timestamp;
    v_cand       timestamptz;
    v_best       timestamptz;
    v_best_hour  timestamp;
    v_offset0    interval;
    v_end        timestamp;
    v_dom_ok     boolean;
    v_dow_ok     boolean;
    v_day_ok     boolean;
BEGIN
    IF p_after IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_every_seconds IS NOT NULL THEN
        RETURN to_timestamp(((floor(extract(epoch FROM p_after) / p_every_seconds) + 1)
                             * p_every_seconds)::double precision);
    END IF;

    v_start := (p_after AT TIME ZONE p_tz) - v_margin;
    v_offset0 := v_start - ((v_start AT TIME ZONE p_tz) AT TIME ZONE 'UTC');
    v_day := v_start::date;
    v_last_day := v_day + (366 * 8 + 2);
    WHILE v_day <= v_last_day LOOP
        IF NOT (extract(month FROM v_day)::integer = ANY (p_months)) THEN
            v_day := (date_trunc('month', v_day) + interval '1 month')::date;
            CONTINUE;
        END IF;
        v_dom_ok := extract(day FROM v_day)::integer = ANY (p_doms);
        v_dow_ok := extract(dow FROM v_day)::integer = ANY (p_dows);
        -- Vixie cron's rule: both restricted, either may match; otherwise both must.
        v_day_ok := CASE WHEN p_dom_restricted AND p_dow_restricted THEN v_dom_ok OR v_dow_ok
                         ELSE v_dom_ok AND v_dow_ok END;
        IF v_day_ok THEN
            FOREACH v_h IN ARRAY p_hours LOOP
                v_hour := v_day + make_interval(hours => v_h);
                CONTINUE WHEN v_hour + interval '1 hour' <= v_start;
                IF v_best IS NOT NULL AND v_hour >= v_best_hour + interval '1 hour' + v_margin THEN
                    RETURN v_best;
                END IF;
                SELECT min(x.c) INTO v_cand
                FROM (SELECT (v_hour + make_interval(mins => m, secs => s)) AT TIME ZONE p_tz AS c
                      FROM unnest(p_minutes) AS m, unnest(p_seconds) AS s) x
                WHERE x.c > p_after;
                IF v_cand IS NOT NULL AND (v_best IS NULL OR v_cand < v_best) THEN
                    v_best := v_cand;
                    v_best_hour := v_hour;
                    -- The same UTC offset from the walk's start to past any local time
                    -- that could still map earlier: the mapping is monotonic there, so
                    -- this first hit is the earliest.
                    v_end := v_hour + interval '1 hour' + v_margin;
                    IF v_end - ((v_end AT TIME ZONE p_tz) AT TIME ZONE 'UTC') = v_offset0 THEN
                        RETURN v_best;
                    END IF;
                END IF;
            END LOOP;
        END IF;
        v_day := v_day + 1;
    END LOOP;
    RETURN v_best;
END
$$;
