"""calls.post_call_answer: the caller's answer to the optional post-call question

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('calls') as batch_op:
        batch_op.add_column(sa.Column('post_call_answer', sa.String(length=8), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('calls') as batch_op:
        batch_op.drop_column('post_call_answer')
