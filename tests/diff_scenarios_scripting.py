"""Differential scenarios for Lua scripting (EVAL, EVALSHA, EVAL_RO, SCRIPT), merged into
diff_scenarios.SCENARIOS.

Scripts call every kind of command (strings, hashes, lists, sets, sorted sets, multi-key ones
whose keys live on different shards of darner) and return every kind of value, in RESP2 and
RESP3 (the scenarios run under both); errors from the script layer, from the commands the
script calls, and from EVAL's own argument checks.
"""

import hashlib

from differential import T, X

SCENARIOS = {}


def _sha(body):
    return hashlib.sha1(body.encode()).hexdigest()

SCENARIOS["eval_returns_every_type"] = [
    ("EVAL", "return 1", "0"),
    ("EVAL", "return 3.99", "0"),
    ("EVAL", "return -2.5", "0"),
    ("EVAL", "return 'hello'", "0"),
    ("EVAL", "return true", "0"),
    ("EVAL", "return false", "0"),
    ("EVAL", "return nil", "0"),
    ("EVAL", "return {1, 2, {3, 'four', {5.5}}, 'x'}", "0"),
    ("EVAL", "return {1, nil, 3}", "0"),
    ("EVAL", "return {}", "0"),
    ("EVAL", "return {ok='fine'}", "0"),
    ("EVAL", "return {err='My Error'}", "0"),
    ("EVAL", "return {err='-prefixed'}", "0"),
    ("EVAL", "return redis.status_reply('STATUS')", "0"),
    ("EVAL", "return redis.error_reply('CUSTOM some text')", "0"),
    ("EVAL", "return redis.error_reply('no prefix')", "0"),
    ("EVAL", "return redis.sha1hex('abc')", "0"),
    ("EVAL", "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", "2", "k1", "k2", "a1", "a2"),
    ("EVAL", "return cjson.encode({1, 2, 'x'})", "0"),
    ("EVAL", "return cjson.decode('[1,2,{\"a\":3}]')[3].a", "0"),
    ("EVAL", "return cmsgpack.unpack(cmsgpack.pack({1, 2, 3}))", "0"),
    ("EVAL", "return bit.band(0xff, 0x0f)", "0"),
    ("EVAL", "return struct.pack('>I2', 258)", "0"),
    ("EVAL", "return tostring(1e17)", "0"),
    ("EVAL", "return string.format('%d-%s', 7, 'x')", "0"),
]

SCENARIOS["eval_calls_commands"] = [
    ("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "s1", "v1"),
    ("EVAL", "return redis.call('GET', KEYS[1])", "1", "s1"),
    ("EVAL", "return redis.call('GET', 'missing')", "0"),
    ("EVAL", "return redis.call('INCRBY', KEYS[1], 5)", "1", "counter"),
    ("EVAL", "return redis.call('INCRBYFLOAT', KEYS[1], '1.5')", "1", "fl"),
    # Keys of several shards in one script, and multi-key commands across shards.
    ("EVAL", "redis.call('MSET', 'a', 1, 'b', 2, 'c', 3, 'd', 4) "
             "return redis.call('MGET', 'a', 'b', 'c', 'd', 'nope')", "0"),
    ("EVAL", "return redis.call('DEL', 'a', 'b', 'nope')", "0"),
    ("EVAL", "return redis.call('EXISTS', 'a', 'b', 'c', 'd')", "0"),
    ("EVAL", "redis.call('HSET', KEYS[1], 'f1', 'v1', 'f2', 'v2') "
             "return redis.call('HGETALL', KEYS[1])", "1", "h"),
    ("EVAL", "redis.call('RPUSH', KEYS[1], 'x', 'y', 'z') "
             "return redis.call('LRANGE', KEYS[1], 0, -1)", "1", "l"),
    ("EVAL", "redis.call('SADD', KEYS[1], 'm') return redis.call('SMEMBERS', KEYS[1])", "1", "set"),
    ("EVAL", "redis.call('ZADD', KEYS[1], 1.5, 'one', 2, 'two') "
             "return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')", "1", "z"),
    ("EVAL", "return redis.call('ZSCORE', KEYS[1], 'one')", "1", "z"),
    ("EVAL", "return redis.call('TYPE', KEYS[1])", "1", "z"),
    ("EVAL", "return redis.call('RENAME', 'c', 'renamed')", "0"),
    ("EVAL", "return redis.call('GET', 'renamed')", "0"),
    ("EVAL", "return redis.call('PING')", "0"),
    ("EVAL", "return redis.call('ECHO', 'hi')", "0"),
    ("EVAL", "return redis.call('EXPIRE', KEYS[1], 100)", "1", "s1"),
    ("EVAL", "return redis.call('TTL', KEYS[1])", "1", "s1"),
    ("GET", "s1"), ("MGET", "a", "b", "c", "d", "renamed"), ("HGETALL", "h"),
    # Redis 7.2 lets scripts call blocking commands, which then do not block (7.0 refused them).
    X(b"*2\r\n$1\r\nl\r\n$1\r\nx\r\n", "EVAL", "return redis.call('BLPOP', KEYS[1], 0)", "1", "l"),
    X(b"$5\r\nfalse\r\n", "EVAL", "return tostring(redis.call('BLPOP', 'empty-list', 0))", "0"),
    ("EVAL", "return redis.call('HGETALL', 'missing')", "0"),
    ("EVAL", "return redis.call('SMEMBERS', 'missing')", "0"),
]

SCENARIOS["eval_errors"] = [
    ("SET", "str", "x"),
    ("EVAL", "return redis.call('INCR', KEYS[1])", "1", "str"),
    ("EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "str"),
    ("EVAL", "local r = redis.pcall('INCR', KEYS[1]) return r['err']", "1", "str"),
    ("EVAL", "return redis.call('LPUSH', KEYS[1], 'x')", "1", "str"),
    ("EVAL", "return redis.call('nosuchcommand')", "0"),
    ("EVAL", "return redis.pcall('nosuchcommand')", "0"),
    ("EVAL", "return redis.call('GET')", "0"),
    ("EVAL", "return redis.call('GET', 'a', 'b')", "0"),
    ("EVAL", "return redis.call()", "0"),
    ("EVAL", "return redis.call('SET', 'k', {})", "0"),
    ("EVAL", "return redis.call('EVAL', 'return 1', 0)", "0"),
    ("EVAL", "return redis.call('MULTI')", "0"),
    ("EVAL", "return redis.call('SUBSCRIBE', 'ch')", "0"),
    ("EVAL", "error('raised')", "0"),
    ("EVAL", "error({err='TABLE raised'})", "0"),
    ("EVAL", "return undefined_global", "0"),
    ("EVAL", "x = 1", "0"),
    ("EVAL", "os.exit()", "0"),
    ("EVAL", "return loadstring('return 1')()", "0"),
    ("EVAL", "this is not lua", "0"),
    ("EVAL", "return 1", "-1"),
    ("EVAL", "return 1", "3", "a"),
    ("EVAL", "return 1", "x"),
    ("EVAL", "return 1"),
    ("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"),
    ("EVALSHA", "short", "0"),
    ("EVAL", "#!lua flags=no-writes,bogus\nreturn 1", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('SET', 'k', 'v')", "0"),
    ("EVAL", "#!notlua\nreturn 1", "0"),
    ("EVAL", "#!lua\nreturn redis.call('GET', 'str')", "0"),
]

SCENARIOS["eval_ro_and_script_cache"] = [
    ("SET", "k", "v"),
    ("EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "k"),
    ("EVAL_RO", "return redis.call('SET', KEYS[1], 'w')", "1", "k"),
    ("EVAL_RO", "#!lua\nreturn 1", "0"),
    ("EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])", "1", "k"),
    ("GET", "k"),
    ("SCRIPT", "LOAD", "return ARGV[1] .. '!'"),
    ("EVALSHA", _sha("return ARGV[1] .. '!'"), "0", "x"),
    ("EVALSHA", _sha("return ARGV[1] .. '!'").upper(), "0", "y"),
    ("SCRIPT", "EXISTS", _sha("return ARGV[1] .. '!'"), "nope"),
    ("SCRIPT", "LOAD", "return 'cached'"),
    ("EVALSHA", _sha("return 'cached'"), "0"),
    ("SCRIPT", "LOAD", "syntax error here"),
    ("SCRIPT", "FLUSH", "BOGUS"),
    ("SCRIPT", "FLUSH"),
    ("SCRIPT", "FLUSH", "ASYNC"),
    ("SCRIPT", "FLUSH", "SYNC"),
    ("SCRIPT", "EXISTS", _sha("return 'cached'")),
    ("EVALSHA", _sha("return 'cached'"), "0"),
    ("SCRIPT", "KILL"),
    ("SCRIPT", "NOSUCH"),
    ("SCRIPT",),
]

SCENARIOS["eval_in_multi"] = [
    ("MULTI",),
    ("SET", "m1", "1"),
    ("EVAL", "return redis.call('INCR', KEYS[1])", "1", "m1"),
    ("EVAL", "return redis.call('MGET', 'm1', 'm2')", "0"),
    ("EXEC",),
    ("MULTI",),
    ("EVAL", "return redis.call('INCR', KEYS[1])", "-1"),
    ("EXEC",),
]

SCENARIOS["eval_setresp"] = [
    ("HSET", "h", "f", "v"),
    ("EVAL", "redis.setresp(3) return redis.call('HGETALL', KEYS[1])", "1", "h"),
    ("EVAL", "redis.setresp(3) return redis.call('GET', 'missing')", "0"),
    ("EVAL", "redis.setresp(2) return redis.call('HGETALL', KEYS[1])", "1", "h"),
    ("EVAL", "redis.setresp(3) local m = redis.call('HGETALL', KEYS[1]) return m['map']['f']", "1", "h"),
    ("EVAL", "return redis.setresp(4)", "0"),
    ("EVAL", "return {double=3.5}", "0"),
    ("EVAL", "redis.setresp(3) return {map={a=1}}", "0"),
    ("EVAL", "redis.setresp(3) return {set={a=true}}", "0"),
    ("EVAL", "redis.setresp(3) return redis.call('ZSCORE', 'nozset', 'm')", "0"),
]

LIB = """#!lua name=mylib
local function incr_by(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end
local function read(keys, args)
  return redis.call('MGET', keys[1], keys[2])
end
redis.register_function('incr_by', incr_by)
redis.register_function{function_name='read', callback=read, flags={'no-writes'},
                        description='reads two keys'}
"""

LIB2 = """#!lua name=other
redis.register_function('hello', function(keys, args) return 'hello ' .. args[1] end)
"""

SCENARIOS["functions"] = [
    ("FUNCTION", "FLUSH"),
    ("FUNCTION", "LOAD", LIB),
    ("FUNCTION", "LOAD", LIB),
    ("FUNCTION", "LOAD", "REPLACE", LIB),
    ("FUNCTION", "LOAD", LIB2),
    ("FCALL", "incr_by", "1", "fk", "5"),
    ("FCALL", "incr_by", "1", "fk", "5"),
    ("FCALL", "read", "2", "fk", "nokey"),
    ("FCALL_RO", "read", "2", "fk", "nokey"),
    ("FCALL_RO", "incr_by", "1", "fk", "1"),
    ("FCALL", "hello", "0", "world"),
    ("FCALL", "nosuch", "0"),
    ("FCALL", "incr_by", "-1"),
    ("FCALL", "incr_by", "5", "a"),
    # A library's functions are listed in Redis's dict order (by hash): the type only here,
    # the content in test_scripting.py.
    T("FUNCTION", "LIST"),
    T("FUNCTION", "LIST", "WITHCODE"),
    T("FUNCTION", "LIST", "LIBRARYNAME", "my*"),
    ("FUNCTION", "LIST", "LIBRARYNAME", "oth*"),
    ("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "oth*"),
    ("FUNCTION", "LIST", "LIBRARYNAME", "nomatch*"),
    ("FUNCTION", "LIST", "BOGUS"),
    ("FUNCTION", "STATS"),
    ("FUNCTION", "DELETE", "other"),
    ("FUNCTION", "DELETE", "other"),
    ("FCALL", "hello", "0", "x"),
    ("FUNCTION", "LOAD", "#!lua name=bad\nredis.call('SET', 'x', 1)"),
    ("FUNCTION", "LOAD", "#!lua name=bad\nthis is not lua"),
    ("FUNCTION", "LOAD", "#!lua\nreturn 1"),
    ("FUNCTION", "LOAD", "no header"),
    ("FUNCTION", "LOAD", "#!lua name=nofuncs\nlocal x = 1"),
    ("FUNCTION", "LOAD", "BOGUS", LIB),
    ("FUNCTION", "KILL"),
    ("FUNCTION", "FLUSH", "BOGUS"),
    X(b"-ERR payload version or checksum are wrong\r\n", "FUNCTION", "RESTORE", "not a payload"),
    ("FUNCTION", "FLUSH", "SYNC"),
    ("FUNCTION", "LIST"),
    ("FCALL", "incr_by", "1", "fk", "1"),
]

SCENARIOS["script_and_function_help"] = [
    ("SCRIPT", "HELP"),
    ("script", "help"),
    ("SCRIPT", "HELP", "extra"),
    ("SCRIPT", "BOGUS"),
    ("FUNCTION", "HELP"),
    ("function", "Help"),
    ("FUNCTION", "HELP", "extra"),
    ("FUNCTION", "BOGUS"),
    ("SCRIPT", "KILL"),
    ("FUNCTION", "KILL"),
]

# SELECT inside a script changes the script's database only (Redis 7): the caller stays in its
# own, also when the script's first run is undone and rerun (an undeclared key after a write).
SCENARIOS["eval_select_stays_inside_the_script"] = [
    ("EVAL", "redis.call('SELECT', 3); redis.call('SET', 'sk', 'in3'); return redis.call('GET', 'sk')", "0"),
    ("GET", "sk"),
    ("SET", "sk", "in0"),
    ("EVAL", "redis.call('SELECT', 3); return redis.call('GET', KEYS[1])", "1", "sk"),
    ("GET", "sk"),
    ("EVAL", "redis.call('SELECT', 4); redis.call('INCR', KEYS[1]); redis.call('INCR', ARGV[1]); return {redis.call('GET', KEYS[1]), redis.call('GET', ARGV[1])}", "1", "sel:a", "sel:b"),
    ("EXISTS", "sel:a", "sel:b"),
    ("SELECT", "4"),
    ("MGET", "sel:a", "sel:b"),
    ("FLUSHALL",),
]
