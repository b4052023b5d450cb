"""Understanding the data (issue 15 item 4): date columns detected and expanded (or left out),
high-cardinality text columns hashed / embedded / ignored, the choices carried by the
``DatasetSpec`` into ``task_info``, the input functions, ``InputLayer`` and the engine's feature
columns, so the runner does what the Data page showed; distributions; a template that does not
fit the label; uploads kept in the workspace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from estimator_workbench.data import datasets
from estimator_workbench.data.model_inputs import (
    FORCED_EMBEDDING_DIM,
    InputLayer,
    feature_columns,
    hash_ids,
)
from estimator_workbench.data.profile import (
    column_profile,
    expand_date,
    is_date_column,
    label_task_warning,
    template_task,
)

vega = pytest.importorskip("vega_datasets")
SEATTLE = Path(vega.local_data.seattle_weather.filepath)


@pytest.fixture
def seattle() -> pd.DataFrame:
    return datasets.load_table(SEATTLE)


@pytest.fixture
def cars(tmp_path) -> Path:
    path = tmp_path / "cars.csv"
    pd.read_json(vega.local_data.cars.filepath).to_csv(path, index=False)
    return path


def spec_of(path: Path, **kwargs) -> datasets.DatasetSpec:
    df = datasets.load_table(path)
    return datasets.DatasetSpec({"kind": "file", "path": str(path)}, datasets.infer_schema(df), **kwargs)


class TestDates:
    def test_text_and_datetime_dates_are_detected_numbers_are_not(self):
        assert is_date_column(pd.Series(["2012/01/01", "2012/01/02", None]))
        assert is_date_column(pd.Series(["2012-01-01T10:00:00", "2012-01-02 11:30"]))
        assert is_date_column(pd.Series(pd.to_datetime(["2020-05-01", "2021-06-02"])))
        assert is_date_column(pd.Series(["31/01/2012", "01/02/2012"]))
        assert not is_date_column(pd.Series([2012, 2013]))
        assert not is_date_column(pd.Series(["2012", "2013"]))  # a year as text is a category
        assert not is_date_column(pd.Series(["a", "2012-01-01", "b"]))

    def test_seattle_weather_date_is_a_date_feature_not_an_ignored_id(self, seattle):
        column = datasets.infer_schema(seattle).column("date")
        assert (column.role, column.dtype) == ("feature", "date")

    def test_expansion_gives_year_month_and_day_of_week(self):
        parts = expand_date(pd.Series(["2024-02-29", None, "2012-01-01"]), "d")
        assert parts.columns.tolist() == ["d_year", "d_month", "d_dayofweek"]
        assert parts.iloc[0].tolist() == [2024.0, 2.0, 3.0]  # a Thursday
        assert parts.iloc[2].tolist() == [2012.0, 1.0, 6.0]  # a Sunday
        assert parts.iloc[1].isna().all()

    def test_the_runner_sees_the_expanded_features(self, seattle):
        spec = spec_of(SEATTLE)
        info = datasets.task_info(seattle, spec)
        assert info["date_features"] == {"date": ["date_year", "date_month", "date_dayofweek"]}
        assert info["feature_names"] == ["date_year", "date_month", "date_dayofweek", "precipitation",
                                         "temp_max", "temp_min", "wind"]
        train_rows = datasets.split(seattle, spec)[0]
        assert info["numeric_stats"]["date_month"]["mean"] == pytest.approx(
            pd.to_datetime(train_rows["date"]).dt.month.mean())
        fns = datasets.make_input_fns(spec, seattle, batch_size=5, shuffle_seed=0)
        features, _ = next(iter(fns.eval()))
        first = datasets.split(seattle, spec)[1].iloc[0]
        day = pd.Timestamp(first["date"])
        assert [float(features[k][0]) for k in ("date_year", "date_month", "date_dayofweek")] == \
            [day.year, day.month, day.day_of_week]
        assert "date" not in features
        assert InputLayer(info, embedding_dim=0)(features).shape == (5, 7)

    def test_a_date_left_out_is_not_a_feature(self, seattle):
        spec = spec_of(SEATTLE, encodings={"date": "ignore"})
        info = datasets.task_info(seattle, spec)
        assert info["feature_names"] == ["precipitation", "temp_max", "temp_min", "wind"] == spec.model_features()
        assert spec_of(SEATTLE).model_features() == datasets.task_info(seattle, spec_of(SEATTLE))["feature_names"]
        assert "date_features" not in info

    def test_a_derived_name_that_clashes_is_refused(self):
        df = pd.DataFrame({"d": ["2020-01-01", "2020-02-01"] * 3, "d_year": [1.0] * 6, "y": [0, 1] * 3})
        spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df))
        with pytest.raises(ValueError, match=r"Date column 'd' expands into .* the data already has a column 'd_year'"):
            datasets.task_info(df, spec)

    def test_a_date_typed_column_with_other_values_is_refused(self):
        df = pd.DataFrame({"d": ["2020-01-01", "soon"], "x": [1.0, 2.0], "y": ["a", "b"]})
        schema = datasets.infer_schema(df).replace_column("d", role="feature", dtype="date")
        assert any("Column 'd' is typed date but 1 value(s) are not dates (e.g. 'soon')" in p
                   for p in datasets.validate(df, schema))


class TestHighCardinality:
    def test_cars_name_is_flagged(self, cars):
        df = datasets.load_table(cars)
        assert datasets.high_cardinality(df, ["Name", "Origin"]) == {"Name": 311}

    def test_hash_buckets_reach_the_input_layer_and_the_engine_columns(self, cars):
        spec = spec_of(cars, encodings={"Name": "hash"}, hash_buckets=16, label_missing="drop")
        df = datasets.load_table(cars)
        info = datasets.task_info(df, spec)
        assert info["hashed_features"] == {"Name": 16}
        assert "Name" not in info["categorical_features"] and info["feature_names"][0] == "Name"
        x = datasets.prepare_features(df, spec, info)
        assert x["Name"].iloc[0] == "chevrolet chevelle malibu"
        layer = InputLayer(info, embedding_dim=4)
        features = {c: torch.tensor(x[c].to_numpy()) if c != "Name" else x["Name"].to_numpy() for c in x.columns}
        numeric = len(info["numeric_features"])
        assert layer(features).shape == (len(df), numeric + 4)
        assert InputLayer(info, embedding_dim=0)(features).shape == (len(df), numeric + 16)  # one-hot buckets
        [name_column] = [c for c in feature_columns(info, "indicator") if c.name.startswith("Name")]
        assert type(name_column.categorical_column).__name__ == "HashedCategoricalColumn"
        assert name_column.categorical_column.hash_bucket_size == 16

    def test_hash_ids_are_the_engine_hash(self):
        # TF's documented example of string_to_hash_bucket_fast (3 buckets)
        assert hash_ids(np.array(["Hello", "TensorFlow", "2.x"]), 3).tolist() == [0, 2, 2]

    def test_embedding_is_forced_in_one_hot_models_and_ignore_drops_the_column(self, cars):
        df = datasets.load_table(cars)
        info = datasets.task_info(df, spec_of(cars, encodings={"Name": "embedding"}, label_missing="drop"))
        assert info["embedded_features"] == ["Name"]
        layer = InputLayer(info, embedding_dim=0)
        assert layer.out_dim == len(info["numeric_features"]) + FORCED_EMBEDDING_DIM
        kinds = {c.name: type(c).__name__ for c in feature_columns(info, "indicator")}
        assert kinds["Name_embedding"] == "EmbeddingColumn"
        ignored = datasets.task_info(df, spec_of(cars, encodings={"Name": "ignore"}, label_missing="drop"))
        assert "Name" not in ignored["feature_names"]


class TestSpec:
    def test_encodings_round_trip_and_change_the_fingerprint(self, cars):
        plain = spec_of(cars, label_missing="drop")
        hashed = spec_of(cars, encodings={"Name": "hash"}, hash_buckets=8, label_missing="drop")
        assert "encodings" not in plain.to_dict()  # earlier specs read and fingerprint as before
        assert datasets.DatasetSpec.from_dict(hashed.to_dict()) == hashed
        assert hashed.fingerprint() != plain.fingerprint()

    def test_a_wrong_encoding_is_refused_with_the_allowed_ones(self, cars):
        with pytest.raises(ValueError, match=r"encodings\['Year'\] = 'hash' is not allowed: a date column takes "
                                             r"one of \('expand', 'ignore'\)"):
            spec_of(cars, encodings={"Year": "hash"})
        with pytest.raises(ValueError, match=r"only date and categorical columns take an encoding, and "
                                             r"'Horsepower' is numeric"):
            spec_of(cars, encodings={"Horsepower": "ignore"})
        with pytest.raises(ValueError, match="hash_buckets must be an integer from 2 to 1000000, given: 1"):
            spec_of(cars, encodings={"Name": "hash"}, hash_buckets=1)


    def test_predicting_on_new_data_keeps_the_encodings_of_its_columns(self, cars, tmp_path):
        spec = spec_of(cars, encodings={"Name": "ignore", "Year": "expand"}, label_missing="drop")
        df = datasets.load_table(cars)
        info = datasets.task_info(df, spec)
        new = df.drop(columns=["Name", "Origin"]).head(3)  # no label, nor the ignored column
        path = tmp_path / "new.csv"
        new.to_csv(path, index=False)
        predict_spec = datasets.prediction_spec(spec, {"kind": "file", "path": str(path)}, new)
        assert predict_spec.encodings == {"Year": "expand"}
        x = datasets.prepare_features(datasets.load_table(path), predict_spec, info, for_predict=True)
        assert x["Year_year"].tolist() == [1970.0] * 3


class TestProfiles:
    def test_numeric_histogram_and_missing(self):
        p = column_profile(pd.Series([1.0, 2.0, 2.0, None, 4.0]), "numeric", bins=3)
        assert (p["missing"], p["count"], p["counts"], p["edges"]) == (1, 4, [1, 2, 1], [1.0, 2.0, 3.0, 4.0])

    def test_top_categories_with_the_rest_summed(self):
        p = column_profile(pd.Series(["a"] * 3 + ["b"] * 2 + ["c", "d", None]), "categorical", top=2)
        assert p["categories"] == ["a", "b", "(other 2 values)"] and p["counts"] == [3, 2, 2]


class TestTemplateFit:
    def test_task_of_a_template(self):
        assert template_task("mlp_classifier", "") == "classification"
        assert template_task("DNNRegressor", "") == "regression"
        assert template_task("mine", "task = require_task(params['task'], 'regression', 'X')") == "regression"
        assert template_task("wide_and_deep", "") is None

    def test_regression_on_classes_and_classification_on_a_quantity_warn(self):
        assert "is categorical (3 classes)" in label_task_warning(
            "mlp_regressor", "", "species", "categorical", pd.Series(["a", "b", "c"]))
        assert "only 4 distinct integer values: they look like classes" in label_task_warning(
            "mlp_regressor", "", "grade", "numeric", pd.Series([1, 2, 3, 4] * 5))
        assert "is numeric (continuous values): a regression task" in label_task_warning(
            "DNNClassifier", "", "price", "numeric", pd.Series([1.5, 2.25, 3.0]))
        assert label_task_warning("mlp_regressor", "", "price", "numeric", pd.Series(np.linspace(0, 1, 50))) is None
        assert label_task_warning("mlp_classifier", "", "species", "categorical", pd.Series(["a", "b"])) is None


class TestUploads:
    def test_stored_listed_and_deleted(self, tmp_path):
        body = b"a,b\n1,x\n2,y\n"
        path = datasets.save_upload(tmp_path, "../my data!.csv", body)
        assert path == tmp_path / "datasets" / "my_data.csv"
        assert [p.name for p in datasets.list_uploads(tmp_path)] == ["my_data.csv"]
        assert datasets.upload_path(tmp_path, "my_data.csv") == path
        with pytest.raises(ValueError, match=r"Upload name '\.\./x\.csv' is not a stored upload's name"):
            datasets.upload_path(tmp_path, "../x.csv")
        datasets.delete_upload(tmp_path, "my_data.csv")
        assert datasets.list_uploads(tmp_path) == []
        with pytest.raises(ValueError, match=r"No upload named 'my_data.csv' in the workspace"):
            datasets.delete_upload(tmp_path, "my_data.csv")

    def test_size_bounded(self, tmp_path):
        with pytest.raises(ValueError, match="over the size limit"):
            datasets.save_upload(tmp_path, "big.csv", b"a,b\n" + b"1,2\n" * 100, max_bytes=50)
        assert datasets.list_uploads(tmp_path) == []


class TestThroughTheRunnerBuild:
    """The run's own build path (``build.build_estimator``, what the runner calls) trains and
    predicts with the choices the Data page stored in the spec."""

    def run_spec(self, template: str, spec: datasets.DatasetSpec, params=None) -> dict:
        from estimator_workbench import templates

        return {"template": {"name": template, "code": templates.get_template(template).code},
                "params": params or {}, "dataset": spec.to_dict(), "schedule": {"batch_size": 32},
                "run_config": {"tf_random_seed": 0, "device": "cpu", "log_step_count_steps": None}}

    def test_mlp_on_seattle_weather_with_the_date_expanded(self, tmp_path):
        from estimator_workbench.execution import build

        estimator, fns = build.build_estimator(self.run_spec("mlp_classifier", spec_of(SEATTLE)), tmp_path / "m")
        assert fns.info["feature_names"][:3] == ["date_year", "date_month", "date_dayofweek"]
        estimator.train(fns.train, steps=5)
        assert estimator.evaluate(fns.eval)["global_step"] == 5
        batch = next(iter(estimator.predict(fns.predict, yield_single_examples=False)))
        assert batch["probabilities"].shape[1] == 5  # drizzle, fog, rain, snow, sun

    def test_dnn_classifier_on_cars_with_the_name_hashed(self, cars, tmp_path):
        from estimator_workbench.execution import build

        spec = spec_of(cars, encodings={"Name": "hash"}, hash_buckets=32, label_missing="drop")
        estimator, fns = build.build_estimator(self.run_spec("DNNClassifier", spec, {"learning_rate": 0.05}),
                                               tmp_path / "m")
        estimator.train(fns.train, steps=5)
        names = estimator.get_variable_names()
        assert any("Name_embedding" in n for n in names), names  # the hashed column's embedding
        assert estimator.evaluate(fns.eval)["global_step"] == 5


class TestDateGranularity:
    """Issue 28 item 11: the column summary gives a date column's first and last date, and a
    year-only column is counted per year and expanded into its year alone (not a constant month
    and a day of week that only says on which weekday 1 January fell)."""

    YEARS = [f"{y}-01-01" for y in (2010, 2011, 2011, 2013, 2014, 2015)]

    def frame(self, tmp_path) -> tuple[Path, pd.DataFrame]:
        df = pd.DataFrame({"season": self.YEARS * 4, "x": np.arange(24, dtype=float),
                           "y": ["a", "b", "c"] * 8})
        path = tmp_path / "yearly.csv"
        df.to_csv(path, index=False)
        return path, datasets.load_table(path)

    def test_granularity_of_years_months_days_and_times(self):
        from estimator_workbench.data.profile import date_granularity

        assert date_granularity(pd.Series([*self.YEARS, None])) == "year"
        assert date_granularity(pd.Series(["2010-01-01", "2010-07-01"])) == "month"
        assert date_granularity(pd.Series(["2010-01-01", "2010-01-02"])) == "day"
        assert date_granularity(pd.Series(["2010-01-01 06:00", "2011-01-01"])) == "day"
        assert date_granularity(pd.Series(pd.to_datetime(["2010-01-01", "2012-01-01"]))) == "year"

    def test_the_summary_shows_min_and_max_and_a_year_only_column_per_year(self, tmp_path, seattle):
        path, df = self.frame(tmp_path)
        profile = column_profile(df["season"], "date")
        assert (profile["min"], profile["max"], profile["granularity"]) == ("2010", "2015", "year")
        assert profile["categories"] == ["2010", "2011", "2013", "2014", "2015"]
        assert profile["counts"] == [4, 8, 4, 4, 4]
        table = datasets.distribution_table(df, spec_of(path).schema).set_index("column")
        assert table.loc["season", "values"] == "2010 to 2015, per year"
        weather = datasets.distribution_table(seattle, spec_of(SEATTLE).schema).set_index("column")
        # seattle-weather runs from 2012-01-01 to 2015-12-31, one row a day
        assert weather.loc["date", "values"] == "2012-01-01 to 2015-12-31, per month"
        assert len(weather.loc["date", "distribution"]) == 48

    def test_a_year_only_column_is_expanded_into_its_year_alone(self, tmp_path):
        path, df = self.frame(tmp_path)
        spec = spec_of(path)
        assert spec.schema.column("season").dtype == "date"
        info = datasets.task_info(df, spec)
        assert info["date_features"] == {"season": ["season_year"]}
        assert info["feature_names"] == ["season_year", "x"] == spec.model_features(df)
        fns = datasets.make_input_fns(spec, df, batch_size=4, shuffle_seed=0)
        features, _ = next(iter(fns.eval()))
        assert "season_month" not in features and "season_dayofweek" not in features
        first = datasets.split(df, spec)[1].iloc[0]
        assert float(features["season_year"][0]) == pd.Timestamp(first["season"]).year
        from estimator_workbench.data.profile import encoding_note

        assert encoding_note("season", "expand", "date", df["season"]) == \
            "'season' is a date: expanded into season_year (its values are years only)."
