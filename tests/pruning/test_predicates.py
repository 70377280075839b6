from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pytest

from airflow_provider_acid.pruning.predicates import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    In,
    IsNaN,
    IsNull,
    Like,
    Not,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    PredicateError,
    Ref,
    StartsWith,
    between,
    bind,
    evaluate_rows,
    is_bound,
    parse_dnf_filters,
    parse_sql_where,
    referenced_columns,
    rewrite_not,
    to_sql,
)

D = decimal.Decimal

SCHEMA = pa.schema(
    [
        ("amount", pa.int32()),
        ("Category", pa.string()),
        ("ts", pa.timestamp("ns")),
        ("tsz", pa.timestamp("us", tz="UTC")),
        ("tss", pa.timestamp("s")),
        ("d", pa.date32()),
        ("price", pa.decimal128(10, 2)),
        ("x", pa.float64()),
        ("flag", pa.bool_()),
        ("addr", pa.struct([("City", pa.string()), ("zip", pa.int64())])),
        ("year", pa.int16()),  # e.g. a partition column
    ]
)


def sql(text: str) -> str:
    return to_sql(bind(parse_sql_where(text), SCHEMA))


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "amount > 100 AND category IN ('a','b') AND ts >= TIMESTAMP '2024-01-01 00:00:00'",
            And(
                (
                    Compare(">", Ref("amount"), 100),
                    In(Ref("category"), ("a", "b")),
                    Compare(">=", Ref("ts"), dt.datetime(2024, 1, 1)),
                )
            ),
        ),
        (
            "x BETWEEN 1 AND 5",
            And((Compare(">=", Ref("x"), 1), Compare("<=", Ref("x"), 5))),
        ),
        ("name LIKE 'abc%'", StartsWith(Ref("name"), "abc")),
        ("name LIKE 'abc'", Compare("=", Ref("name"), "abc")),
        ("name LIKE '%abc'", Like(Ref("name"), "%abc")),
        ("name NOT LIKE 'ab%'", NotStartsWith(Ref("name"), "ab")),
        ("c IS NOT NULL", NotNull(Ref("c"))),
        ("c IS NULL", IsNull(Ref("c"))),
        (
            "NOT (a = 1 OR b < 2)",
            Not(Or((Compare("=", Ref("a"), 1), Compare("<", Ref("b"), 2)))),
        ),
        ("d = DATE '2024-01-01'", Compare("=", Ref("d"), dt.date(2024, 1, 1))),
        ("p = CAST('1.25' AS DECIMAL(10,2))", Compare("=", Ref("p"), D("1.25"))),
        ("v > -5.5", Compare(">", Ref("v"), D("-5.5"))),
        ("v >= -(3)", Compare(">=", Ref("v"), -3)),
        ("5 < v", Compare(">", Ref("v"), 5)),
        ("a.b.c = 1", Compare("=", Ref("a.b.c"), 1)),
        ("`my col` <> 'x'", Compare("!=", Ref("my col"), "x")),
        ("x NOT IN (2, 1, 2)", NotIn(Ref("x"), (1, 2))),
        ("isnan(x)", IsNaN(Ref("x"))),
        ("NOT isnan(x)", NotNaN(Ref("x"))),
        ("flag", Compare("=", Ref("flag"), True)),
        ("TRUE", AlwaysTrue()),
        ("WHERE x = 1;", Compare("=", Ref("x"), 1)),
        ("x = CAST('NaN' AS DOUBLE)", Compare("=", Ref("x"), math.nan)),
        ("s LIKE 'a!%b%' ESCAPE '!'", StartsWith(Ref("s"), "a%b")),
    ],
)
def test_parse_sql_where(text: str, expected: object) -> None:
    got = parse_sql_where(text)
    if isinstance(expected, Compare) and isinstance(expected.value, float):
        assert isinstance(got, Compare) and math.isnan(got.value)
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("lower(name) = 'a'", "LOWER(name) = 'a'"),
        ("a = b", "a = b"),
        ("x IN (SELECT y FROM t)", "SELECT y FROM t"),
        ("x = NULL", "x = NULL"),
        ("x RLIKE 'a.*'", "RLIKE"),
        ("x + 1 > 2", "x + 1"),
        ("x = y + 1", "x = y + 1"),
    ],
)
def test_unsupported_sql_quotes_the_fragment(text: str, fragment: str) -> None:
    with pytest.raises(PredicateError) as err:
        parse_sql_where(text)
    assert fragment in str(err.value)


def test_syntax_error_carries_sqlglot_message() -> None:
    with pytest.raises(PredicateError, match="cannot parse WHERE text 'x > 1 AND'"):
        parse_sql_where("x > 1 AND")
    with pytest.raises(PredicateError, match="empty"):
        parse_sql_where("  ")


# ------------------------------------------------------------------ text form


@pytest.mark.parametrize(
    "text",
    [
        "amount > 100 AND category IN ('a', 'b')",
        "NOT (a = 1 OR b < 2)",
        "name LIKE 'a\\\\%b%'",
        "name = 'it\\'s'",
        "x NOT LIKE '%a_'",
        "ts >= TIMESTAMP '2024-01-01 12:00:00.000123'",
        "d = DATE '2024-01-01' OR (a IS NULL AND isnan(x))",
        "`weird col`.`x` = -5",
    ],
)
def test_to_sql_round_trips(text: str) -> None:
    expr = parse_sql_where(text)
    assert parse_sql_where(to_sql(expr)) == expr
    assert str(expr) == to_sql(expr)


def test_normalised_text_is_stable() -> None:
    a = sql("category in ('b','a','b') and AMOUNT between 1 and 5")
    b = sql("amount >= 1 AND amount <= 5 AND category IN ('a', 'b')")
    assert a == "Category IN ('a', 'b') AND amount >= 1 AND amount <= 5"
    assert sorted(a.split(" AND ")) == sorted(b.split(" AND "))


def test_referenced_columns() -> None:
    expr = parse_sql_where("a = 1 OR (b.c > 2 AND NOT a IS NULL) OR d LIKE 'x%'")
    assert referenced_columns(expr) == ["a", "b.c", "d"]


# ------------------------------------------------------------------ DNF


def test_parse_dnf_filters() -> None:
    assert parse_dnf_filters([("a", ">", 1), ("b", "in", [2, 1])]) == And(
        (Compare(">", Ref("a"), 1), In(Ref("b"), (1, 2)))
    )
    assert parse_dnf_filters([[("a", "==", 1)], [("b", "not in", {3}), ("c", "<=", 2)]]) == Or(
        (
            Compare("=", Ref("a"), 1),
            And((NotIn(Ref("b"), (3,)), Compare("<=", Ref("c"), 2))),
        )
    )
    for op in ("=", "==", "!=", "<", "<=", ">", ">="):
        assert isinstance(parse_dnf_filters([("a", op, 1)]), Compare)


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ([], "non-empty"),
        ([("a", "~", 1)], "unknown filter operator '~'"),
        ([("a", "in", "abc")], "needs a list"),
        ([("a", "=", None)], "IS NULL"),
        ([("a", "=")], "(column, op, value)"),
        ([[("a", "=", 1)], []], "bad element"),
    ],
)
def test_bad_dnf_filters(filters: list, message: str) -> None:
    with pytest.raises(PredicateError) as err:
        parse_dnf_filters(filters)
    assert message in str(err.value)


# ------------------------------------------------------------------ NOT push-down


def test_rewrite_not_pushes_down_and_handles_nan() -> None:
    expr = rewrite_not(parse_sql_where("NOT (a = 1 OR NOT (b IN (1, 2) AND c IS NULL))"))
    assert expr == And(
        (
            Compare("!=", Ref("a"), 1),
            In(Ref("b"), (1, 2)),
            IsNull(Ref("c")),
        )
    )
    # NaN < 5 is false, so NOT (x < 5) also holds for NaN: unbound it keeps an isnan term
    assert rewrite_not(Not(Compare("<", Ref("x"), 5))) == Or(
        (Compare(">=", Ref("x"), 5), IsNaN(Ref("x")))
    )
    assert sql("NOT (x < 5)") == "x >= 5.0 OR isnan(x)"
    assert sql("NOT (amount < 5)") == "amount >= 5"
    assert rewrite_not(Not(AlwaysTrue())) == AlwaysFalse()
    assert rewrite_not(Not(NotStartsWith(Ref("s"), "a"))) == StartsWith(Ref("s"), "a")


# ------------------------------------------------------------------ binding


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("AMOUNT > 100.5", "amount >= 101"),
        ("amount < 100.5", "amount <= 100"),
        ("amount = 5.5", "FALSE"),
        ("NOT (amount = 5.5)", "amount IS NOT NULL"),
        ("amount != 5.5", "amount IS NOT NULL"),
        ("amount < 1e30", "amount <= 2147483647"),
        ("amount > 1e30", "FALSE"),
        ("amount = '7'", "amount = 7"),
        ("amount IN (1, 2.5, 3)", "amount IN (1, 3)"),
        ("amount IN (2.5)", "FALSE"),
        ("amount NOT IN (2.5)", "amount IS NOT NULL"),
        ("amount NOT IN (1, 2.5)", "amount != 1"),
        ("category = 'x'", "Category = 'x'"),
        ("d >= '2024-01-01'", "d >= DATE '2024-01-01'"),
        ("d > TIMESTAMP '2024-01-01 10:00:00'", "d >= DATE '2024-01-02'"),
        ("d = TIMESTAMP '2024-01-01 00:00:00'", "d = DATE '2024-01-01'"),
        ("price = 5", "price = 5.00"),
        ("price = 1.005", "FALSE"),
        ("price < 1.005", "price <= 1.00"),
        ("price > 99999999.999", "FALSE"),
        ("x = 1", "x = 1.0"),
        ("x = CAST('NaN' AS DOUBLE)", "isnan(x)"),
        ("x != CAST('NaN' AS DOUBLE)", "NOT isnan(x)"),
        ("x IN (1, CAST('NaN' AS DOUBLE))", "x = 1.0 OR isnan(x)"),
        ("amount = CAST('NaN' AS DOUBLE)", "FALSE"),
        ("isnan(amount)", "FALSE"),
        ("NOT isnan(amount)", "amount IS NOT NULL"),
        ("ts > '2024-01-01 00:00:00.123'", "ts > TIMESTAMP '2024-01-01 00:00:00.123000'"),
        ("ts = DATE '2024-01-01'", "ts = TIMESTAMP '2024-01-01 00:00:00'"),
        (
            "tsz = TIMESTAMP '2024-01-01 02:00:00+02:00'",
            "tsz = TIMESTAMP '2024-01-01 00:00:00'",
        ),
        ("tss >= '2024-01-01 00:00:00.5'", "tss >= TIMESTAMP '2024-01-01 00:00:01'"),
        ("flag = 'true'", "flag = TRUE"),
        ("addr.city LIKE 'Par%'", "addr.City LIKE 'Par%'"),
        ("addr.city LIKE 'P_r%'", "addr.City LIKE 'P%' AND addr.City LIKE 'P_r%'"),
        ("ADDR.ZIP IS NULL", "addr.zip IS NULL"),
        ("addr IS NOT NULL", "addr IS NOT NULL"),
        ("year = 2024", "year = 2024"),
        ("amount > 1 OR amount = 2.5", "amount > 1"),
    ],
)
def test_bind_coerces_literals(text: str, expected: str) -> None:
    assert sql(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "unknown column 'nope'; available columns: amount, Category, ts"),
        ("addr.nope = 1", "unknown column 'addr.nope'"),
        ("amount = 'abc'", "cannot compare column 'amount' of type int32 with 'abc'"),
        ("amount LIKE 'a%'", "LIKE needs a string column; column 'amount'"),
        ("category = 5", "column 'Category' of type string"),
        ("d = 'tomorrow'", "column 'd'"),
        ("flag = 1", "column 'flag'"),
        ("x < CAST('NaN' AS DOUBLE)", "use isnan(x)"),
        ("ts = '2024-01-01 00:00:00.000000001'", "sub-microsecond"),
        ("addr = 1", "supports only IS [NOT] NULL"),
    ],
)
def test_bind_errors_name_the_column(text: str, message: str) -> None:
    with pytest.raises(PredicateError) as err:
        bind(parse_sql_where(text), SCHEMA)
    assert message in str(err.value)


def test_bound_expression_carries_types() -> None:
    bound = bind(parse_sql_where("amount > 1 AND NOT (category = 'a')"), SCHEMA)
    assert is_bound(bound)
    assert not is_bound(parse_sql_where("amount > 1"))
    assert bound.children[0].ref == Ref("amount", pa.int32())


def test_between_helper() -> None:
    assert between("a", 1, 2) == parse_sql_where("a BETWEEN 1 AND 2")


# ------------------------------------------------------------------ row evaluation

ROWS = pa.table(
    {
        "i": pa.array([1, 2, None, 4], pa.int32()),
        "x": pa.array([1.0, math.nan, None, 5.0]),
        "s": pa.array(["abc", "abd", None, "b_c"]),
        "st": pa.array([{"v": 1}, None, {"v": None}, {"v": 4}], pa.struct([("v", pa.int64())])),
        "p": pa.array([D("1.25"), D("2.00"), None, D("-1.00")], pa.decimal128(10, 2)),
        "ts": pa.array(
            [
                dt.datetime(2024, 1, 1, 12, 0, 0, 123),
                dt.datetime(2024, 1, 1, 12, 0, 0, 100),
                None,
                dt.datetime(2024, 1, 2),
            ],
            pa.timestamp("ns"),
        ),
        "cat": pa.array(["a", "b", None, "a"]).dictionary_encode(),
    }
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i > 1", [False, True, False, True]),
        ("i != 2", [True, False, False, True]),
        ("NOT (i = 2)", [True, False, False, True]),
        ("i NOT IN (2)", [True, False, False, True]),
        ("NOT (i IN (1, 2))", [False, False, False, True]),
        ("i IS NULL", [False, False, True, False]),
        ("x > 2", [False, False, False, True]),
        ("x != 1", [False, True, False, True]),  # IEEE: NaN != 1
        ("NOT (x < 2)", [False, True, False, True]),  # NaN < 2 is false
        ("NOT (x >= 2)", [True, True, False, False]),
        ("isnan(x)", [False, True, False, False]),
        ("NOT isnan(x)", [True, False, False, True]),
        ("x = CAST('NaN' AS DOUBLE)", [False, True, False, False]),
        ("s LIKE 'ab%'", [True, True, False, False]),
        ("s NOT LIKE 'ab%'", [False, False, False, True]),
        ("s LIKE 'b\\\\_c'", [False, False, False, True]),
        ("s LIKE '_b_'", [True, True, False, False]),
        ("st.v > 0", [True, False, False, True]),
        ("st.v IS NULL", [False, True, True, False]),
        ("p >= 1.25", [True, True, False, False]),
        ("ts >= '2024-01-01 12:00:00.000110'", [True, False, False, True]),
        ("cat = 'a'", [True, False, False, True]),
        ("i > 1 OR s = 'abc'", [True, True, False, True]),
        ("NOT (i > 1 AND s = 'abd')", [True, False, False, True]),
        ("i IS NULL OR NOT (i > 1)", [True, False, True, False]),
    ],
)
def test_evaluate_rows_sql_semantics(text: str, expected: list[bool]) -> None:
    assert evaluate_rows(parse_sql_where(text), ROWS).to_pylist() == expected


def test_evaluate_rows_accepts_bound_expressions() -> None:
    bound = bind(parse_sql_where("i >= 2"), ROWS.schema)
    assert evaluate_rows(bound, ROWS).to_pylist() == [False, True, False, True]
    with pytest.raises(PredicateError, match="unknown column 'nope'"):
        evaluate_rows(parse_sql_where("nope = 1"), ROWS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i < 'Infinity'", [True, True, False, True]),
        ("i >= 'Infinity'", [False, False, False, False]),
        ("i > '-Infinity'", [True, True, False, True]),
        ("i != CAST('Infinity' AS DECIMAL(10, 2))", [True, True, False, True]),
        ("i = CAST('-Infinity' AS DOUBLE)", [False, False, False, False]),
    ],
)
def test_an_integer_column_against_infinity_binds_beyond_its_range(text, expected) -> None:
    bound = bind(parse_sql_where(text), ROWS.schema)
    assert evaluate_rows(bound, ROWS).to_pylist() == expected
