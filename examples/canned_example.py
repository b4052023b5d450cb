"""A canned DNNClassifier on the bundled penguins data: train_and_evaluate with early stopping,
then export for serving and load the export without any model code."""

import tempfile

import numpy as np
import pandas as pd
import torch

import estimator_engine as ee

df = pd.read_csv("sample_data/penguins.csv").dropna()
numeric = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
df[numeric] = (df[numeric] - df[numeric].mean()) / df[numeric].std()
df[numeric] = df[numeric].astype("float32")
species = sorted(df["species"].unique())
train, evaluation = df.iloc[::2], df.iloc[1::2]
features = [*numeric, "island", "sex"]

feature_columns = [ee.feature_column.numeric_column(name) for name in numeric] + [
    ee.feature_column.embedding_column(
        ee.feature_column.categorical_column_with_vocabulary_list(name, sorted(df[name].unique())), dimension=2)
    for name in ("island", "sex")]
model_dir = tempfile.mkdtemp(prefix="penguins_")
classifier = ee.DNNClassifier(hidden_units=[32, 16], feature_columns=feature_columns, n_classes=3,
                              label_vocabulary=species, optimizer="Adam", model_dir=model_dir,
                              config=ee.RunConfig(tf_random_seed=0, save_checkpoints_steps=100))

train_input_fn = ee.inputs.pandas_input_fn(train[features], train["species"], batch_size=32,
                                           num_epochs=None, shuffle=True)
eval_input_fn = ee.inputs.pandas_input_fn(evaluation[features], evaluation["species"], shuffle=False)
early_stop = ee.early_stopping.stop_if_no_decrease_hook(
    classifier, "loss", max_steps_without_decrease=200, run_every_secs=None, run_every_steps=50)
eval_result, _ = ee.train_and_evaluate(
    classifier,
    ee.TrainSpec(train_input_fn, max_steps=2000, hooks=[early_stop]),
    ee.EvalSpec(eval_input_fn, steps=None, every_n_steps=50))
print({key: round(float(value), 4) for key, value in eval_result.items()})

# Serving takes tensors: the categorical columns are exported as string-free numeric inputs only.
numeric_only = ee.DNNClassifier(hidden_units=[16], feature_columns=feature_columns[:4], n_classes=3,
                                label_vocabulary=species, optimizer="Adam",
                                config=ee.RunConfig(tf_random_seed=0))
numeric_only.train(ee.inputs.pandas_input_fn(train[numeric], train["species"], num_epochs=None, shuffle=True),
                   steps=300)
receiver_fn = ee.export.build_raw_serving_input_receiver_fn(
    {name: torch.zeros(1, dtype=torch.float32) for name in numeric})
export_dir = numeric_only.export_saved_model(tempfile.mkdtemp(prefix="export_"), receiver_fn)
serve = ee.export.load(export_dir)  # needs no model_fn, no estimator_engine model code
batch = {name: evaluation[name].to_numpy()[:5] for name in numeric}
served = serve(batch)  # scores (probabilities) and classes (the class names, bytes, as TF serves them)
print(export_dir, {key: np.round(value, 3).tolist() if value.dtype.kind == "f" else value.tolist()
                   for key, value in ((k, np.asarray(v)) for k, v in served.items())})
